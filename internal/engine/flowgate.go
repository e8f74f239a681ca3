package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/parslee-ai/car-server/internal/approvals"
	"github.com/parslee-ai/car-server/internal/flow"
	"github.com/parslee-ai/car-server/protocol"
)

// The information-flow gate: internal/flow follows secret-labelled data
// along a proposal's references and state keys (and keys the connection's
// earlier proposals tainted). Data that would reach a sink blocks the
// proposal, naming the path; a forbidden ordering is escalated to a person
// through the approval ledger, parking like the permission gate's approvals.

// EventFlowViolation records secret data found on its way to a sink.
const EventFlowViolation EventKind = "flow_violation"

// SetToolLabels replaces the tool labels in force (start, SIGHUP).
func (rt *Runtime) SetToolLabels(l *flow.Labels) {
	if l == nil {
		l = flow.Defaults()
	}
	rt.labels.Store(l)
}

// ToolLabels are the labels in force: the built-in defaults until set.
func (rt *Runtime) ToolLabels() *flow.Labels {
	if l := rt.labels.Load(); l != nil {
		return l
	}
	rt.labels.CompareAndSwap(nil, flow.Defaults())
	return rt.labels.Load()
}

// flowHistory is what a connection's earlier proposals left behind: state
// keys whose values carry labels, per tenant, and the tools it ran. Taint
// is kept for the connection's life: a later clean write does not clear it.
type flowHistory struct {
	mu      sync.Mutex
	tainted map[string]map[string]flow.Taint // tenant → key → taint
	ran     map[string]bool
}

// snapshot copies what one analysis needs.
func (h *flowHistory) snapshot(tenant string) (map[string]flow.Taint, map[string]bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	tainted := make(map[string]flow.Taint, len(h.tainted[tenant]))
	for k, t := range h.tainted[tenant] {
		tainted[k] = t
	}
	ran := make(map[string]bool, len(h.ran))
	for k := range h.ran {
		ran[k] = true
	}
	return tainted, ran
}

// flowInput is the analysis's input for actions as submitted by sub. g is
// their graph when the caller has it already, else nil.
func (rt *Runtime) flowInput(sub *Submission, actions []protocol.Action, g *graph) flow.Input {
	tainted, ran := sub.Session.flowHist.snapshot(sub.Tenant)
	return flow.Input{Steps: flowSteps(actions, g), Labels: rt.ToolLabels(), Tainted: tainted, Ran: ran}
}

// flowSteps is the proposal as the analysis sees it: the scheduler's edges,
// the references of each action, and the literal state keys it reads and
// writes (a key still holding a reference is judged once it is resolved).
// g is the actions' graph, or nil to build it.
func flowSteps(actions []protocol.Action, g *graph) []flow.Step {
	if g == nil {
		g = buildGraph(actions)
	}
	literal := func(keys []string) []string {
		return slices.DeleteFunc(keys, refPattern.MatchString)
	}
	steps := make([]flow.Step, len(actions))
	for i := range actions {
		a := &actions[i]
		steps[i] = flow.Step{ID: a.ID, Refs: g.refs[i], Deps: g.deps[i], Reads: literal(readKeys(a)), Writes: literal(writtenKeys(a))}
		if a.Type == protocol.ActionToolCall {
			steps[i].Tool = a.Tool
		}
	}
	return steps
}

// flowGate blocks exfiltration and escalates forbidden orderings.
type flowGate struct{ rt *Runtime }

func (flowGate) Name() string { return "information_flow" }

func (g flowGate) Admit(ctx context.Context, sub *Submission) error {
	in := g.rt.flowInput(sub, sub.Proposal.Actions, sub.graph)
	rep := flow.Analyze(in)
	sub.flow = rep
	if in.Labelled() {
		sub.flowIn = &in
		sub.flowAt = make(map[string]int, len(sub.Proposal.Actions))
		for i := range sub.Proposal.Actions {
			sub.flowAt[sub.Proposal.Actions[i].ID] = i
		}
	}
	if len(rep.Leaks) > 0 {
		return fmt.Errorf("information-flow gate blocked the proposal: %s", g.rt.leaks(sub, rep))
	}
	if len(rep.Orderings) == 0 {
		return nil
	}
	if err := g.rt.escalateOrderings(ctx, sub, rep.Orderings); err != nil {
		return fmt.Errorf("information-flow gate: %w", err)
	}
	return nil
}

// leaks records each leak as an event and says what would leak where.
func (rt *Runtime) leaks(sub *Submission, rep *flow.Report) string {
	paths := make([]string, len(rep.Leaks))
	for i, l := range rep.Leaks {
		a := &sub.Proposal.Actions[l.Sink]
		paths[i] = l.String()
		rt.Events.Append(Event{Kind: EventFlowViolation, ProposalID: sub.Proposal.ID, ActionID: a.ID, Connection: sub.Session.ID, Data: map[string]any{
			"sink": a.Tool, "path": l.Path,
		}})
	}
	return "secret data would reach a sink: " + strings.Join(paths, "; ") + " (remove the path, or relabel the tools in tool-labels.json if they are not what the labels say)"
}

// escalateOrderings asks a person about each action that runs a tool after
// one it must not follow (see escalate).
func (rt *Runtime) escalateOrderings(ctx context.Context, sub *Submission, hits []flow.OrderingHit) error {
	items := make([]escalation, len(hits))
	for k, h := range hits {
		a := &sub.Proposal.Actions[h.Step]
		items[k] = escalation{step: h.Step, fingerprint: orderingFingerprint(h.Rule, a),
			why:    fmt.Sprintf("'%s' after '%s' (%s) is a forbidden ordering", h.Rule.Then, h.Rule.First, h.FirstAt),
			signal: "ordering " + h.Rule.First + " → " + h.Rule.Then}
	}
	return rt.escalate(ctx, sub, items)
}

// orderingFingerprint names one operation run after a tool it must not
// follow: approving it does not approve the operation anywhere else.
func orderingFingerprint(rule flow.Ordering, a *protocol.Action) string {
	h := sha256.New()
	fmt.Fprintf(h, "flow-ordering\x00%s\x00%s\x00%s", rule.First, rule.Then, approvals.Fingerprint(a))
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// flowCheck analyses the proposal again when a state action's references
// are resolved: its key is known only now, and a reference must not carry
// secret data to a key a sink reads, or read a tainted key into a sink.
type flowCheck struct{ rt *Runtime }

func (flowCheck) Name() string { return "information_flow" }

func (c flowCheck) Check(_ context.Context, sub *Submission, a *protocol.Action) error {
	if a.Type != protocol.ActionStateRead && a.Type != protocol.ActionStateWrite {
		return nil
	}
	i, ok := sub.flowAt[a.ID]
	if sub.flowIn == nil || !ok || &sub.Proposal.Actions[i] == a {
		return nil // nothing labelled, or as admitted: the gate has judged it
	}
	orig := sub.Proposal.Actions[i]
	refs := map[string]bool{}
	referencedIDs(orig.Parameters["key"], refs)
	referencedIDs(orig.Parameters["keys"], refs)
	if len(refs) == 0 {
		return nil // its keys are the ones the gate saw
	}
	// The admitted step with only its keys resolved: its references still
	// name the data it carries. The rest of the input is the gate's.
	params := maps.Clone(orig.Parameters)
	for _, k := range []string{"key", "keys"} {
		if v, ok := a.Parameters[k]; ok {
			params[k] = v
		}
	}
	orig.Parameters = params
	in := *sub.flowIn
	in.Steps = slices.Clone(in.Steps)
	in.Steps[i].Reads, in.Steps[i].Writes = readKeys(&orig), writtenKeys(&orig)
	if rep := flow.Analyze(in); len(rep.Leaks) > 0 {
		return fmt.Errorf("with its references resolved, %s", c.rt.leaks(sub, rep))
	}
	return nil
}

// noteFlow remembers, for the connection's later proposals, the keys this
// one wrote with labelled data and the tools it ran.
func (rt *Runtime) noteFlow(sub *Submission, res *protocol.ProposalResult) {
	rep := sub.flow
	if rep == nil {
		return // blocked before the analysis
	}
	h := &sub.Session.flowHist
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, r := range res.Results {
		if r.Status != protocol.StatusSucceeded || i >= len(sub.Proposal.Actions) {
			continue
		}
		a := &sub.Proposal.Actions[i]
		if a.Type == protocol.ActionToolCall {
			if h.ran == nil {
				h.ran = map[string]bool{}
			}
			h.ran[a.Tool] = true
		}
		labels := rep.StepLabels(i)
		if len(labels) == 0 || len(r.StateChanges) == 0 {
			continue
		}
		if h.tainted == nil {
			h.tainted = map[string]map[string]flow.Taint{}
		}
		if h.tainted[sub.Tenant] == nil {
			h.tainted[sub.Tenant] = map[string]flow.Taint{}
		}
		origin := fmt.Sprintf("proposal %s action '%s'", sub.Proposal.ID, a.ID)
		if a.Tool != "" {
			origin += fmt.Sprintf(" (%s)", a.Tool)
		}
		for k := range r.StateChanges {
			h.tainted[sub.Tenant][k] = flow.Taint{Labels: labels, Origin: origin}
		}
	}
}

// VerifyFlow adds the information-flow findings to a verify result, as
// proposal.submit from this connection would find them: a leak is an error,
// a forbidden ordering a warning (it would wait for an approval).
func (rt *Runtime) VerifyFlow(res *VerifyResult, p *protocol.ActionProposal, s *Session) {
	sub := &Submission{Proposal: p, Session: s}
	rep := flow.Analyze(rt.flowInput(sub, p.Actions, nil))
	c := protocol.CheckRecord{Name: "information_flow", Ran: true, Tier: TierDecision,
		Verifies:     "no secret-labelled data reaches a sink along references and state keys, and no forbidden ordering runs without approval",
		CannotVerify: "keys named only by references (judged when resolved), and data a tool moves outside the proposal"}
	for _, l := range rep.Leaks {
		c.Findings++
		res.Issues = append(res.Issues, protocol.VerifyIssue{ActionID: p.Actions[l.Sink].ID, Severity: "error", Tier: c.Tier,
			Message: "information flow: secret data would reach a sink: " + l.String() + "; proposal.submit would block it"})
		res.Valid = false
	}
	for _, h := range rep.Orderings {
		c.Findings++
		a := &p.Actions[h.Step]
		res.Issues = append(res.Issues, protocol.VerifyIssue{ActionID: a.ID, Severity: "warning", Tier: c.Tier,
			Message: fmt.Sprintf("information flow: '%s' after '%s' (%s) is a forbidden ordering; proposal.submit escalates it to approval (fingerprint %s)", h.Rule.Then, h.Rule.First, h.FirstAt, orderingFingerprint(h.Rule, a))})
	}
	res.Evidence.Checks = append(res.Evidence.Checks, c)
}
