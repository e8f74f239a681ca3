package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/protocol"
)

// Monte Carlo: how often a plan works when tools fail at given rates, and
// what breaks first. Each tool_call succeeds with its tool's rate (per
// attempt); a failure cascades along the graph exactly as Simulate models a
// blocked action. Seeded SplitMix64, so the same inputs and seed give
// byte-identical output.

// verify.monte_carlo's params and reply are protocol's wire types.
type (
	MonteCarloConfig = protocol.MonteCarloConfig
	MonteCarloParams = protocol.MonteCarloParams
	MonteCarloResult = protocol.MonteCarloResult
)

// Defaults and bounds of verify.monte_carlo.
const (
	DefaultTrials = 1000
	MaxTrials     = 100_000
	DefaultSeed   = uint64(0x5EED_CA12)
	defaultRate   = 0.5
)

// splitmix64 is a small, seedable, portable PRNG.
type splitmix64 struct{ state uint64 }

func (s *splitmix64) next() uint64 {
	s.state += 0x9E3779B97F4A7C15
	z := s.state
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// float returns a uniform value in [0, 1).
func (s *splitmix64) float() float64 { return float64(s.next()>>11) / (1 << 53) }

// goal is a decidable goal condition, or the names of what is not.
type goal struct {
	kind  string
	pred  protocol.Precondition
	parts []goal
}

// parseGoal reads a GoalCondition (goals.evaluate's type): {type:
// state_predicate, key, operator, value} and {type: all_of|any_of,
// conditions: [...]} are decided from a simulated state; any other type
// cannot be, fails closed and is named.
func parseGoal(raw json.RawMessage, underivable *[]string) (goal, error) {
	var g protocol.GoalCondition
	if err := json.Unmarshal(raw, &g); err != nil {
		return goal{}, fmt.Errorf("goal must be a GoalCondition object: %v", err)
	}
	return simulatedGoal(&g, underivable)
}

// simulatedGoal is parseGoal on a decoded condition.
func simulatedGoal(g *protocol.GoalCondition, underivable *[]string) (goal, error) {
	switch g.Type {
	case "state_predicate":
		if g.Key == "" {
			return goal{}, fmt.Errorf("goal state_predicate needs 'key'")
		}
		op := g.Operator
		if op == "" {
			op = "eq"
		}
		return goal{kind: g.Type, pred: protocol.Precondition{Key: g.Key, Operator: op, Value: g.Value}}, nil
	case "all_of", "any_of":
		out := goal{kind: g.Type}
		for i := range g.Conditions {
			sub, err := simulatedGoal(&g.Conditions[i], underivable)
			if err != nil {
				return goal{}, err
			}
			out.parts = append(out.parts, sub)
		}
		return out, nil
	case "":
		return goal{}, fmt.Errorf("goal needs a 'type' (state_predicate, all_of, any_of)")
	}
	*underivable = append(*underivable, g.Type)
	return goal{kind: "underivable"}, nil
}

func (g goal) holds(state map[string]any) bool {
	switch g.kind {
	case "state_predicate":
		v, ok := state[g.pred.Key]
		return checkPrecondition(g.pred, v, ok) == nil
	case "all_of":
		for _, p := range g.parts {
			if !p.holds(state) {
				return false
			}
		}
		return true
	case "any_of":
		for _, p := range g.parts {
			if p.holds(state) {
				return true
			}
		}
		return false
	}
	return false // underivable: fail closed
}

// maxTrialActions bounds trials × actions, so one request cannot occupy the
// daemon for hours.
const maxTrialActions = 5_000_000

// MonteCarlo runs the trials. It is pure and reproducible; it stops with an
// error when ctx ends.
func MonteCarlo(ctx context.Context, p *protocol.ActionProposal, params MonteCarloParams, tools *ToolRegistry) (MonteCarloResult, error) {
	return MonteCarloObserved(ctx, p, params, tools, nil)
}

// ObservedRates are the tools' outcomes in the trajectory store's window
// (tools.feedback's figures): Window is its days, and a tool with nothing
// dispatched in it is absent.
type ObservedRates struct {
	Window int
	Tools  map[string]protocol.ToolFeedback
}

// MonteCarloObserved is MonteCarlo where a tool without a caller-supplied
// rate takes its observed success rate when it has one in observed's
// window (source "trajectories"), else the default. Nil observed: the
// daemon keeps no trajectories.
func MonteCarloObserved(ctx context.Context, p *protocol.ActionProposal, params MonteCarloParams, tools *ToolRegistry, observed *ObservedRates) (MonteCarloResult, error) {
	trials, seed, def, retries := DefaultTrials, DefaultSeed, defaultRate, 0
	if c := params.Config; c.Trials != nil {
		if *c.Trials < 1 || *c.Trials > MaxTrials {
			return MonteCarloResult{}, fmt.Errorf("config.trials must be 1 to %d", MaxTrials)
		}
		trials = *c.Trials
	}
	if params.Config.Seed != nil {
		seed = *params.Config.Seed
	}
	if params.Config.DefaultSuccessRate != nil {
		def = clamp01(*params.Config.DefaultSuccessRate)
	}
	if params.Config.RetryAttempts != nil {
		if *params.Config.RetryAttempts < 0 || *params.Config.RetryAttempts > 100 {
			return MonteCarloResult{}, fmt.Errorf("config.retry_attempts must be 0 to 100")
		}
		retries = *params.Config.RetryAttempts
	}
	if trials*max(len(p.Actions), 1) > maxTrialActions {
		return MonteCarloResult{}, fmt.Errorf("config.trials × actions is %d; at most %d: run fewer trials", trials*len(p.Actions), maxTrialActions)
	}
	res := MonteCarloResult{Trials: trials, Seed: seed, GoalUnderivableConditions: []string{}}
	var g *goal
	if len(params.Goal) > 0 && string(params.Goal) != "null" {
		parsed, err := parseGoal(params.Goal, &res.GoalUnderivableConditions)
		if err != nil {
			return MonteCarloResult{}, err
		}
		g = &parsed
		sort.Strings(res.GoalUnderivableConditions)
	}

	// Rates: caller-supplied, else the default; clamped to 0..1.
	rates := map[string]float64{}
	res.RateProvenance = protocol.RateProvenance{OverriddenByCaller: []string{}, Tools: []protocol.ToolRate{}}
	if params.RateWindowDays != nil {
		res.RateProvenance.WindowDays = *params.RateWindowDays
	}
	if observed != nil {
		res.RateProvenance.TrajectoriesAvailable = true
		res.RateProvenance.WindowDays = observed.Window
	}
	toolSet := map[string]bool{}
	for i := range p.Actions {
		if p.Actions[i].Type == protocol.ActionToolCall {
			toolSet[p.Actions[i].Tool] = true
		}
	}
	for _, t := range jsonvalue.SortedKeys(toolSet) {
		r, ok := params.ToolSuccessRates[t]
		rate := protocol.ToolRate{Tool: t, Source: "default"}
		fb, seen := protocol.ToolFeedback{}, false
		if observed != nil {
			fb, seen = observed.Tools[t]
			seen = seen && fb.Dispatched > 0 && fb.SuccessRate != nil
		}
		switch {
		case ok:
			r, rate.Source = clamp01(r), "caller"
			res.RateProvenance.OverriddenByCaller = append(res.RateProvenance.OverriddenByCaller, t)
		case seen:
			r, rate.Source = *fb.SuccessRate, "trajectories"
		default:
			r = def
		}
		if seen {
			rate.Succeeded, rate.Dispatched = &fb.Succeeded, &fb.Dispatched
		}
		rate.Rate = r
		rates[t] = r
		res.RateProvenance.Tools = append(res.RateProvenance.Tools, rate)
	}

	gr := buildGraph(p.Actions)
	validateStatically(gr, tools)
	sorted, _ := gr.order()
	n := len(p.Actions)
	rng := &splitmix64{state: seed}
	var (
		toolCalls   = make([]int, trials)
		executed    = make([]int, trials)
		allLanded   int
		goalReached int
		rejectedCnt = make([]int, n)
		failedCnt   = make([]int, n)
		landedCnt   = make([]int, n)
		blastSum    = make([]int, n)
		present     = map[string]int{}
		values      = map[string]map[string]*protocol.ValueProbability{}
	)
	for tr := 0; tr < trials; tr++ {
		if tr%64 == 0 && ctx.Err() != nil {
			return MonteCarloResult{}, fmt.Errorf("stopped after %d of %d trials: %v", tr, trials, context.Cause(ctx))
		}
		state := copyState(params.InitialState)
		blocked := make([]string, n)
		failed := make([]bool, n)
		copy(blocked, gr.rejected)
		for _, i := range sorted {
			a := &p.Actions[i]
			if reason := blockReason(gr, i, a, state, blocked); reason != "" {
				blocked[i] = reason
				continue
			}
			if a.Type == protocol.ActionToolCall {
				ok := false
				for at := 0; at <= retries && !ok; at++ {
					toolCalls[tr]++
					ok = rng.float() < rates[a.Tool]
				}
				executed[tr]++
				if !ok {
					failed[i] = true
					blocked[i] = "failed"
					continue
				}
			} else {
				executed[tr]++
			}
			landedCnt[i]++
			for k, v := range effects(a) {
				state[k] = v
			}
		}
		landed := true
		for i := 0; i < n; i++ {
			switch {
			case failed[i]:
				failedCnt[i]++
				blastSum[i] += gr.downstreamRejected(i, blocked, failed)
				landed = false
			case blocked[i] != "":
				rejectedCnt[i]++
				landed = false
			}
		}
		if landed {
			allLanded++
		}
		if g != nil && g.holds(state) {
			goalReached++
		}
		for k, v := range state {
			present[k]++
			enc := string(jsonvalue.Canonical(v))
			if values[k] == nil {
				values[k] = map[string]*protocol.ValueProbability{}
			}
			if values[k][enc] == nil {
				values[k][enc] = &protocol.ValueProbability{Value: v}
			}
			values[k][enc].Probability++
		}
	}
	ft := float64(trials)
	res.PAllEffectsLanded = float64(allLanded) / ft
	if g != nil {
		p := float64(goalReached) / ft
		res.PGoalReached = &p
	}
	res.ToolCalls = distribution(toolCalls)
	res.ActionsExecuted = distribution(executed)
	for _, k := range jsonvalue.SortedKeys(present) {
		kd := protocol.KeyDistribution{Key: k, PPresent: float64(present[k]) / ft}
		encs := jsonvalue.SortedKeys(values[k])
		for _, e := range encs {
			vp := values[k][e]
			kd.Values = append(kd.Values, protocol.ValueProbability{Value: vp.Value, Probability: vp.Probability / ft})
		}
		sort.SliceStable(kd.Values, func(a, b int) bool { return kd.Values[a].Probability > kd.Values[b].Probability })
		res.StateDistribution = append(res.StateDistribution, kd)
	}
	if res.StateDistribution == nil {
		res.StateDistribution = []protocol.KeyDistribution{}
	}
	for i := range p.Actions {
		o := protocol.ActionOutcome{ActionID: p.Actions[i].ID, PRejected: float64(rejectedCnt[i]) / ft, PFailed: float64(failedCnt[i]) / ft, PEffectsLanded: float64(landedCnt[i]) / ft}
		if failedCnt[i] > 0 {
			o.MeanBlastRadius = float64(blastSum[i]) / float64(failedCnt[i])
		}
		res.ActionOutcomes = append(res.ActionOutcomes, o)
	}
	if res.ActionOutcomes == nil {
		res.ActionOutcomes = []protocol.ActionOutcome{}
	}
	return res, nil
}

// downstreamRejected counts the transitive dependents of i that did not run.
func (g *graph) downstreamRejected(i int, blocked []string, failed []bool) int {
	seen := map[int]bool{}
	stack := []int{i}
	count := 0
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, d := range g.dependents[x] {
			if seen[d] {
				continue
			}
			seen[d] = true
			if blocked[d] != "" && !failed[d] {
				count++
			}
			stack = append(stack, d)
		}
	}
	return count
}

func distribution(xs []int) protocol.Distribution {
	s := append([]int(nil), xs...)
	sort.Ints(s)
	sum := 0
	for _, x := range s {
		sum += x
	}
	q := func(p float64) int { return s[int(math.Ceil(p*float64(len(s))))-1] }
	return protocol.Distribution{Mean: float64(sum) / float64(len(s)), Min: s[0], P50: q(0.5), P95: q(0.95), Max: s[len(s)-1]}
}

func clamp01(x float64) float64 {
	if math.IsNaN(x) {
		return 0
	}
	return math.Max(0, math.Min(1, x))
}
