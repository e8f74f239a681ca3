package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/protocol"
)

// Static verification: pure functions over a proposal, an initial state and
// the caller's tool registry. Nothing here calls a tool or touches the
// Runtime's state. The graph and its layering are the scheduler's own.

// Evidence tiers: how a finding was derived.
const (
	TierDecision  = "decision_procedure"
	TierHeuristic = "heuristic"
	TierSampled   = "sampled"
)

// The analyses answer protocol's wire types; these names are the engine's.
type (
	VerifyResult     = protocol.VerifyResult
	SimulateResult   = protocol.SimulateResult
	Equivalence      = protocol.EquivalentResult
	PrunedDependency = protocol.PrunedDependency
)

// order returns the non-rejected actions in a topological order (proposal
// order among the ready), then the rejected ones in proposal order.
func (g *graph) order() (sorted []int, rejected []int) {
	n := len(g.actions)
	indeg := make([]int, n)
	var ready []int
	for i := 0; i < n; i++ {
		if g.rejected[i] != "" {
			rejected = append(rejected, i)
			continue
		}
		indeg[i] = len(g.deps[i])
		if indeg[i] == 0 {
			ready = append(ready, i)
		}
	}
	for len(ready) > 0 {
		i := ready[0]
		ready = ready[1:]
		sorted = append(sorted, i)
		for _, d := range g.dependents[i] {
			if g.rejected[d] != "" {
				continue
			}
			if indeg[d]--; indeg[d] == 0 {
				ready = append(ready, d)
			}
		}
	}
	return sorted, rejected
}

// effects are the state changes an action declares: its expected_effects
// and, for a state_write, its key and value.
func effects(a *protocol.Action) map[string]any {
	out := make(map[string]any, len(a.ExpectedEffects)+1)
	for k, v := range a.ExpectedEffects {
		out[k] = v
	}
	if a.Type == protocol.ActionStateWrite {
		if k, ok := a.Parameters["key"].(string); ok && k != "" {
			out[k] = a.Parameters["value"]
		}
	}
	return out
}

func copyState(s map[string]any) map[string]any {
	out := make(map[string]any, len(s))
	for k, v := range s {
		out[k] = v
	}
	return out
}

// Simulate predicts the state the executor leaves behind when every
// dispatched tool succeeds. An action that cannot run — rejected by the
// validator, a precondition that does not hold, a state dependency that is
// not available, or a dependency that was itself blocked — is skipped, and
// the skip cascades along the graph.
func Simulate(p *protocol.ActionProposal, initial map[string]any, tools *ToolRegistry) SimulateResult {
	return newSimulation(p, tools).run(initial)
}

// simulation is a proposal's graph, validated once, ready to run from any
// number of start states.
type simulation struct {
	p                *protocol.ActionProposal
	g                *graph
	sorted, rejected []int
}

func newSimulation(p *protocol.ActionProposal, tools *ToolRegistry) *simulation {
	g := buildGraph(p.Actions)
	validateStatically(g, tools)
	sorted, rejected := g.order()
	return &simulation{p: p, g: g, sorted: sorted, rejected: rejected}
}

// run simulates the proposal from initial; it does not change the graph.
func (s *simulation) run(initial map[string]any) SimulateResult {
	p, g := s.p, s.g
	state := copyState(initial)
	blocked := make([]string, len(p.Actions))
	for _, i := range s.rejected {
		blocked[i] = g.rejected[i]
	}
	for _, i := range s.sorted {
		a := &p.Actions[i]
		if reason := blockReason(g, i, a, state, blocked); reason != "" {
			blocked[i] = reason
			continue
		}
		for k, v := range effects(a) {
			state[k] = v
		}
	}
	res := SimulateResult{FinalState: state, Blocked: []protocol.BlockedAction{}}
	for i, r := range blocked {
		if r != "" {
			res.Blocked = append(res.Blocked, protocol.BlockedAction{ActionID: p.Actions[i].ID, Reason: r})
		}
	}
	return res
}

// blockReason says why action i cannot run against state, or "".
func blockReason(g *graph, i int, a *protocol.Action, state map[string]any, blocked []string) string {
	for _, d := range g.deps[i] {
		if blocked[d] != "" {
			return fmt.Sprintf("dependency '%s' cannot run", g.actions[d].ID)
		}
	}
	for _, pc := range a.Preconditions {
		v, ok := state[pc.Key]
		if err := checkPrecondition(pc, v, ok); err != nil {
			return err.Error()
		}
	}
	for _, k := range a.StateDependencies {
		if _, ok := state[k]; !ok {
			return fmt.Sprintf("state dependency '%s' is not available", k)
		}
	}
	return ""
}

// validateStatically adds the validator's per-action rejections (unknown
// tools, schema violations) to the graph, as proposal.submit would.
func validateStatically(g *graph, tools *ToolRegistry) {
	if tools == nil {
		return
	}
	for i := range g.actions {
		a := &g.actions[i]
		if g.rejected[i] != "" || a.Type != protocol.ActionToolCall {
			continue
		}
		t, ok := tools.Lookup(a.Tool)
		if !ok {
			g.reject(i, fmt.Sprintf("unknown tool '%s'", a.Tool))
			continue
		}
		if !g.hasRefs[i] {
			if err := t.ValidateParams(context.Background(), any(a.Parameters)); err != nil {
				g.reject(i, err.Error())
			}
		}
	}
	g.cascade()
}

// Verify reports every problem it can find in one pass. Unlike Simulate it
// applies the effects of actions that cannot run, so one defect does not
// bury the others under knock-on findings.
func Verify(p *protocol.ActionProposal, initial map[string]any, tools *ToolRegistry, maxActions int) VerifyResult {
	return verify(p, initial, tools, maxActions, true)
}

// verify is Verify; without warnings it leaves out the two checks that
// only ever warn (write_conflicts, whose reachability costs more than the
// proposal's size, and loop_detection), reporting them as not run: the
// validity is the same, and its cost linear in the proposal.
func verify(p *protocol.ActionProposal, initial map[string]any, tools *ToolRegistry, maxActions int, warnings bool) VerifyResult {
	g := buildGraph(p.Actions)
	res := VerifyResult{Issues: []protocol.VerifyIssue{}, Conflicts: [][3]string{}}
	checks := map[string]*protocol.CheckRecord{}
	check := func(name, verifies, cannot, tier string, ran bool) *protocol.CheckRecord {
		c := &protocol.CheckRecord{Name: name, Ran: ran, Verifies: verifies, CannotVerify: cannot, Tier: tier}
		checks[name] = c
		res.Evidence.Checks = append(res.Evidence.Checks, protocol.CheckRecord{})
		return c
	}
	add := func(c *protocol.CheckRecord, actionID, severity, msg string) {
		c.Findings++
		res.Issues = append(res.Issues, protocol.VerifyIssue{ActionID: actionID, Severity: severity, Message: msg, Tier: c.Tier})
	}

	structure := check("structure", "action ids are unique, dependencies and $id.output references name actions of the proposal, and the dependency graph has no cycle",
		"that the dependencies are the ones the plan needs", TierDecision, true)
	for i, r := range g.rejected {
		if r != "" && !strings.HasPrefix(r, "depends on rejected action") {
			add(structure, p.Actions[i].ID, "error", r)
		}
	}
	fields := check("fields", "every field of the proposal and its actions is one the IR knows (an unknown one is ignored when the proposal runs, or refuses it under strict field checking)",
		"what an ignored field was meant to say", TierDecision, true)
	for _, w := range p.FieldWarnings {
		add(fields, "", "warning", w)
	}
	bounds := check("resource_bounds", fmt.Sprintf("the proposal has at most max_actions (%d) actions", maxActions), "runtime cost, duration or tool quotas", TierDecision, maxActions > 0)
	if maxActions > 0 && len(p.Actions) > maxActions {
		add(bounds, "", "error", fmt.Sprintf("proposal has %d actions; at most %d are accepted (max_actions)", len(p.Actions), maxActions))
	}
	toolCheck := check("tools", "every tool_call names a tool registered on this connection", "that the tool does what its name says", TierDecision, tools != nil)
	hasSchemas := false
	if tools != nil {
		for _, s := range tools.List() {
			if len(s.Parameters) > 0 && string(s.Parameters) != "{}" {
				hasSchemas = true
			}
		}
	}
	schema := check("param_schema", "parameters without $references match the registered JSON Schema of their tool", "parameters built from references, and anything a schema does not say", TierDecision, hasSchemas)
	if tools != nil {
		for i := range p.Actions {
			a := &p.Actions[i]
			if a.Type != protocol.ActionToolCall {
				continue
			}
			t, ok := tools.Lookup(a.Tool)
			if !ok {
				add(toolCheck, a.ID, "error", tools.UnknownTool(a.Tool))
				continue
			}
			if hasSchemas && !g.hasRefs[i] {
				if err := t.ValidateParams(context.Background(), any(a.Parameters)); err != nil {
					add(schema, a.ID, "error", err.Error())
				}
			}
		}
	}

	// The forward walk: apply every action's declared effects in execution
	// order, blocked or not, checking preconditions and reads on the way.
	writers := map[string][]int{}
	for i := range p.Actions {
		for k := range effects(&p.Actions[i]) {
			writers[k] = append(writers[k], i)
		}
	}
	pre := check("preconditions", "each precondition holds on the state the declared effects produce, or some action could establish it", "that tools produce their declared effects", TierDecision, true)
	deps := check("state_dependencies", "every state key an action reads is in the initial state or written by some action", "values written outside this proposal", TierDecision, true)
	state := copyState(initial)
	sorted, rejected := g.order()
	for _, i := range append(sorted, rejected...) {
		a := &p.Actions[i]
		for _, pc := range a.Preconditions {
			v, ok := state[pc.Key]
			err := checkPrecondition(pc, v, ok)
			if err == nil {
				continue
			}
			if len(writers[pc.Key]) == 0 {
				add(pre, a.ID, "error", fmt.Sprintf("impossible plan: %v, and no action of the proposal writes '%s'", err, pc.Key))
			} else {
				add(pre, a.ID, "warning", fmt.Sprintf("%v at this point of the plan (written by %s, not ordered before it or with another value)", err, actionIDs(p, writers[pc.Key])))
			}
		}
		for _, k := range a.StateDependencies {
			if _, ok := state[k]; !ok && len(writers[k]) == 0 {
				add(deps, a.ID, "warning", fmt.Sprintf("reads state '%s', which is neither in the initial state nor written by any action", k))
			}
		}
		for k, v := range effects(a) {
			state[k] = v
		}
	}
	res.SimulatedState = state

	conf := check("write_conflicts", "no two actions write one state key without an ordering between them", "writes made by tools beyond their declared effects", TierDecision, warnings)
	loop := check("loop_detection", "no tool is called three or more times with identical parameters", "whether repeated calls are a runaway loop or a legitimate poll", TierHeuristic, warnings)
	if warnings {
		findConflicts(p, g, sorted, rejected, writers, &res, func(actionID, msg string) { add(conf, actionID, "warning", msg) })
		findLoops(p, func(actionID, msg string) { add(loop, actionID, "warning", msg) })
	}

	res.ExecutionLevels = g.levels()
	if res.ExecutionLevels == nil {
		res.ExecutionLevels = [][]string{}
	}
	order := []string{"structure", "resource_bounds", "tools", "param_schema", "preconditions", "state_dependencies", "write_conflicts", "loop_detection", "fields"}
	ran := 0
	for i, name := range order {
		res.Evidence.Checks[i] = *checks[name]
		if checks[name].Ran {
			ran++
		}
	}
	modelled := 0
	for i := range p.Actions {
		a := &p.Actions[i]
		if a.Type != protocol.ActionToolCall || len(a.ExpectedEffects) > 0 {
			modelled++
		} else {
			res.Evidence.UntestedRegions = append(res.Evidence.UntestedRegions, fmt.Sprintf("action '%s': tool '%s' declares no expected_effects, so its effect on state is not modelled", a.ID, a.Tool))
		}
	}
	if res.Evidence.UntestedRegions == nil {
		res.Evidence.UntestedRegions = []string{}
	}
	coverage := 1.0
	if len(p.Actions) > 0 {
		coverage = float64(modelled) / float64(len(p.Actions))
	}
	res.Evidence.Confidence = float64(ran) / float64(len(order)) * coverage
	res.Evidence.Assumptions = []string{
		"tools produce exactly their declared expected_effects and nothing else",
		"initial_state is the state the proposal will run against",
		"no writer outside this proposal changes the keys it reads",
	}
	res.Evidence.ResidualRisks = []string{
		"tool failures, timeouts and retries at runtime",
		"policies, permission tiers, approvals and supervisors (checked at submission, not here)",
	}
	res.Valid = true
	for _, is := range res.Issues {
		if is.Severity == "error" {
			res.Valid = false
		}
	}
	return res
}

// findConflicts reports writers of one key with no ordering between them.
// Writers of a key are compared with the next writer in execution order:
// if every such pair is ordered, all writes of the key are. Reporting
// consecutive pairs keeps the output linear in the number of writers.
func findConflicts(p *protocol.ActionProposal, g *graph, sorted, rejected []int, writers map[string][]int, res *VerifyResult, warn func(actionID, msg string)) {
	position := make([]int, len(p.Actions))
	for pos, i := range append(sorted, rejected...) {
		position[i] = pos
	}
	var shared []int // the actions that write a key some other action writes too
	for _, ws := range writers {
		if len(ws) > 1 {
			shared = append(shared, ws...)
		}
	}
	reach := newReachability(g, shared)
	for _, k := range jsonvalue.SortedKeys(writers) {
		ws := append([]int(nil), writers[k]...)
		sort.Slice(ws, func(x, y int) bool { return position[ws[x]] < position[ws[y]] })
		for x := 0; x+1 < len(ws); x++ {
			a, b := ws[x], ws[x+1]
			if !reach.reaches(a, b) && !reach.reaches(b, a) {
				res.Conflicts = append(res.Conflicts, [3]string{p.Actions[a].ID, p.Actions[b].ID, k})
				warn(p.Actions[b].ID, fmt.Sprintf("writes '%s' with no ordering against action '%s', which writes it too", k, p.Actions[a].ID))
			}
		}
	}
}

// findLoops reports a tool called three or more times with identical
// parameters.
func findLoops(p *protocol.ActionProposal, warn func(actionID, msg string)) {
	seen := map[string][]string{}
	var sigs []string
	for i := range p.Actions {
		a := &p.Actions[i]
		if a.Type != protocol.ActionToolCall {
			continue
		}
		sig := a.Tool + "\x00" + string(jsonvalue.Canonical(a.Parameters))
		if _, ok := seen[sig]; !ok {
			sigs = append(sigs, sig)
		}
		seen[sig] = append(seen[sig], a.ID)
	}
	for _, sig := range sigs {
		if ids := seen[sig]; len(ids) >= 3 {
			warn(ids[len(ids)-1], fmt.Sprintf("tool '%s' is called %d times with identical parameters (%s): a runaway loop?", strings.SplitN(sig, "\x00", 2)[0], len(ids), strings.Join(ids, ", ")))
		}
	}
}

func actionIDs(p *protocol.ActionProposal, idx []int) string {
	ids := make([]string, len(idx))
	for i, x := range idx {
		ids[i] = "'" + p.Actions[x].ID + "'"
	}
	return strings.Join(ids, ", ")
}

// MaxTestStates bounds the start states equivalent compares from: its cost
// is the states times the actions.
const MaxTestStates = 100

// Equivalent compares Simulate of a and b from each test state (two defaults
// when none are given), building each graph once. It samples: proposals that
// differ only on states no probe reaches compare equal. Callers bound states
// by MaxTestStates.
func Equivalent(a, b *protocol.ActionProposal, states []map[string]any, tools *ToolRegistry) Equivalence {
	if len(states) == 0 {
		states = []map[string]any{{}, {"x": 1.0, "y": 2.0}}
	}
	out := Equivalence{Differences: []protocol.Difference{}, StatesTested: len(states), Sampled: true,
		Note: "sampled over the given start states, not decided for all states"}
	sa, sb := newSimulation(a, tools), newSimulation(b, tools)
	for si, st := range states {
		fa := sa.run(st).FinalState
		fb := sb.run(st).FinalState
		keys := map[string]bool{}
		for k := range fa {
			keys[k] = true
		}
		for k := range fb {
			keys[k] = true
		}
		for _, k := range jsonvalue.SortedKeys(keys) {
			va, oka := fa[k]
			vb, okb := fb[k]
			if oka != okb || !jsonvalue.Equal(va, vb) {
				out.Differences = append(out.Differences, protocol.Difference{StateIndex: si, Key: k, A: va, B: vb, PresentInA: oka, PresentInB: okb})
			}
		}
	}
	out.Equivalent = len(out.Differences) == 0
	return out
}

// Optimize removes phantom state_dependencies — keys listed twice — so
// that any scheduler sees which actions are independent. A dependency on a
// key no earlier action writes stays: it orders nothing, but the executor
// rejects the action when state does not hold the key, so removing it would
// change what runs. Optimize never reorders or removes actions; the
// dependencies left imply exactly the same edges.
func Optimize(p *protocol.ActionProposal) (*protocol.ActionProposal, []PrunedDependency) {
	out := *p
	out.Actions = make([]protocol.Action, len(p.Actions))
	copy(out.Actions, p.Actions)
	pruned := []PrunedDependency{}
	for i := range out.Actions {
		a := &out.Actions[i]
		if len(a.StateDependencies) > 0 {
			var keep []string
			listed := map[string]bool{}
			for _, k := range a.StateDependencies {
				if listed[k] {
					pruned = append(pruned, PrunedDependency{ActionID: a.ID, Key: k, Reason: "listed twice"})
					continue
				}
				keep = append(keep, k)
				listed[k] = true
			}
			a.StateDependencies = keep
		}
	}
	return &out, pruned
}
