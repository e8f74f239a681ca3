package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

// decode builds a proposal from JSON, as the rpc layer does.
func decode(t testing.TB, js string) *protocol.ActionProposal {
	t.Helper()
	p, err := protocol.DecodeProposal([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	Normalize(p)
	return p
}

func registry(t testing.TB) *ToolRegistry {
	t.Helper()
	r := NewToolRegistry(0, SchemaLimits{})
	_, err := r.Register([]protocol.ToolSchema{
		{Name: "deploy"}, {Name: "test"}, {Name: "poll"},
		{Name: "read_file", Parameters: json.RawMessage(`{"type":"object","required":["path"],"properties":{"path":{"type":"string"}}}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestVerifyDetections(t *testing.T) {
	cases := []struct {
		name     string
		proposal string
		initial  map[string]any
		action   string
		severity string
		tier     string
		contains string
	}{
		{"impossible precondition", `{"actions":[{"id":"d","type":"tool_call","tool":"deploy","preconditions":[{"key":"tests_passed","value":true}]}]}`,
			nil, "d", "error", TierDecision, "impossible plan"},
		{"precondition established too late", `{"actions":[{"id":"d","type":"tool_call","tool":"deploy","preconditions":[{"key":"ok","value":true}]},{"id":"t","type":"tool_call","tool":"test","expected_effects":{"ok":true},"dependencies":["d"]}]}`,
			nil, "d", "warning", TierDecision, "written by 't'"},
		{"read but never written", `{"actions":[{"id":"d","type":"tool_call","tool":"deploy","state_dependencies":["artifact"]}]}`,
			nil, "d", "warning", TierDecision, "reads state 'artifact'"},
		{"write conflict", `{"actions":[{"id":"a","type":"tool_call","tool":"deploy","expected_effects":{"env":"a"}},{"id":"b","type":"tool_call","tool":"test","expected_effects":{"env":"b"}}]}`,
			nil, "b", "warning", TierDecision, "no ordering against action 'a'"},
		{"repeated identical calls", `{"actions":[{"id":"p1","type":"tool_call","tool":"poll"},{"id":"p2","type":"tool_call","tool":"poll"},{"id":"p3","type":"tool_call","tool":"poll"}]}`,
			nil, "p3", "warning", TierHeuristic, "3 times with identical parameters"},
		{"unknown tool", `{"actions":[{"id":"x","type":"tool_call","tool":"shel"}]}`,
			nil, "x", "error", TierDecision, "unknown tool 'shel'; registered: deploy, messaging.send, poll, read_file, test"},
		{"schema violation", `{"actions":[{"id":"r","type":"tool_call","tool":"read_file","parameters":{"path":3}}]}`,
			nil, "r", "error", TierDecision, "do not match the schema"},
		{"cycle", `{"actions":[{"id":"a","type":"tool_call","tool":"test","dependencies":["b"]},{"id":"b","type":"tool_call","tool":"test","dependencies":["a"]}]}`,
			nil, "a", "error", TierDecision, "dependency cycle"},
		{"over max_actions", `{"actions":[{"id":"a","type":"state_read","parameters":{"key":"k"}},{"id":"b","type":"state_read","parameters":{"key":"k"}},{"id":"c","type":"state_read","parameters":{"key":"k"}}]}`,
			nil, "", "error", TierDecision, "at most 2 are accepted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			max := 100
			if tc.name == "over max_actions" {
				max = 2
			}
			res := Verify(decode(t, tc.proposal), tc.initial, registry(t), max)
			found := false
			for _, is := range res.Issues {
				if is.ActionID == tc.action && is.Severity == tc.severity && is.Tier == tc.tier && strings.Contains(is.Message, tc.contains) {
					found = true
				}
			}
			if !found {
				t.Fatalf("want %s/%s on %q containing %q, got %+v", tc.severity, tc.tier, tc.action, tc.contains, res.Issues)
			}
			if res.Valid != (tc.severity != "error") {
				t.Fatalf("valid=%v with a %s finding", res.Valid, tc.severity)
			}
		})
	}
}

func TestVerifyCleanProposal(t *testing.T) {
	p := decode(t, `{"actions":[
		{"id":"t","type":"tool_call","tool":"test","expected_effects":{"tests_passed":true}},
		{"id":"d","type":"tool_call","tool":"deploy","preconditions":[{"key":"tests_passed","value":true}],"state_dependencies":["tests_passed"],"expected_effects":{"deployed":true}},
		{"id":"r","type":"tool_call","tool":"read_file","parameters":{"path":"/x"}}]}`)
	res := Verify(p, nil, registry(t), 100)
	if !res.Valid || len(res.Issues) != 0 {
		t.Fatalf("issues %+v", res.Issues)
	}
	if got := mustJSON(t, res.ExecutionLevels); string(got) != `[["t","r"],["d"]]` {
		t.Fatalf("levels %s", got)
	}
	if res.SimulatedState["deployed"] != true || len(res.Conflicts) != 0 {
		t.Fatalf("%+v", res)
	}
	if len(res.Evidence.Checks) != 9 || !res.Evidence.Checks[3].Ran || res.Evidence.Confidence <= 0 || res.Evidence.Confidence >= 1 {
		t.Fatalf("evidence %+v", res.Evidence)
	}
	if len(res.Evidence.UntestedRegions) != 1 || !strings.Contains(res.Evidence.UntestedRegions[0], "'r'") {
		t.Fatalf("untested %v", res.Evidence.UntestedRegions)
	}
}

// verify applies a blocked action's effects; simulate does not, and the
// skip cascades to what depends on it (car#622).
func TestVerifyAndSimulateDiverge(t *testing.T) {
	p := decode(t, `{"actions":[
		{"id":"deploy","type":"tool_call","tool":"deploy","preconditions":[{"key":"tests_passed","value":true}],"expected_effects":{"deployed":true}},
		{"id":"notify","type":"tool_call","tool":"test","state_dependencies":["deployed"],"expected_effects":{"notified":true}},
		{"id":"free","type":"state_write","parameters":{"key":"other","value":1}}]}`)
	v := Verify(p, map[string]any{}, registry(t), 100)
	s := Simulate(p, map[string]any{}, registry(t))
	if v.SimulatedState["deployed"] != true || v.SimulatedState["notified"] != true {
		t.Fatalf("verify should apply blocked effects: %v", v.SimulatedState)
	}
	if _, ok := s.FinalState["deployed"]; ok {
		t.Fatalf("simulate applied a blocked action's effects: %v", s.FinalState)
	}
	if _, ok := s.FinalState["notified"]; ok {
		t.Fatal("the block did not cascade to the dependent")
	}
	if s.FinalState["other"] != 1.0 && fmt.Sprint(s.FinalState["other"]) != "1" {
		t.Fatalf("an independent action's effect is missing: %v", s.FinalState)
	}
	if len(s.Blocked) != 2 || s.Blocked[0].ActionID != "deploy" || s.Blocked[1].ActionID != "notify" {
		t.Fatalf("blocked %+v", s.Blocked)
	}
}

func TestEquivalentSamples(t *testing.T) {
	a := decode(t, `{"actions":[{"id":"w","type":"state_write","parameters":{"key":"x","value":5}}]}`)
	b := decode(t, `{"actions":[{"id":"w","type":"state_write","parameters":{"key":"x","value":5}},
		{"id":"g","type":"state_write","parameters":{"key":"hidden","value":1},"preconditions":[{"key":"mode","value":"rare"}]}]}`)
	// b differs only on a state no default probe reaches: reported equal (the documented limit).
	if eq := Equivalent(a, b, nil, nil); !eq.Equivalent || !eq.Sampled || eq.StatesTested != 2 {
		t.Fatalf("%+v", eq)
	}
	// A probe that reaches it tells them apart.
	eq := Equivalent(a, b, []map[string]any{{"mode": "rare"}}, nil)
	if eq.Equivalent || len(eq.Differences) != 1 || eq.Differences[0].Key != "hidden" {
		t.Fatalf("%+v", eq)
	}
}

func TestOptimizePrunesPhantomDependencies(t *testing.T) {
	p := decode(t, `{"actions":[
		{"id":"a","type":"tool_call","tool":"test","expected_effects":{"built":true}},
		{"id":"b","type":"tool_call","tool":"test","state_dependencies":["built","built","config"]},
		{"id":"c","type":"tool_call","tool":"test","state_dependencies":["later"]},
		{"id":"d","type":"tool_call","tool":"test","expected_effects":{"later":1}}]}`)
	out, pruned := Optimize(p)
	if len(out.Actions) != 4 || out.Actions[2].ID != "c" {
		t.Fatal("optimize reordered or removed actions")
	}
	// Only the duplicate goes: a key no earlier action writes still rejects
	// the action when state lacks it, so it stays.
	if strings.Join(out.Actions[1].StateDependencies, ",") != "built,config" || len(out.Actions[2].StateDependencies) != 1 || len(pruned) != 1 || pruned[0].Reason != "listed twice" {
		t.Fatalf("deps %v %v, pruned %+v", out.Actions[1].StateDependencies, out.Actions[2].StateDependencies, pruned)
	}
	before := mustJSON(t, buildGraph(p.Actions).levels())
	after := mustJSON(t, buildGraph(out.Actions).levels())
	if string(before) != string(after) {
		t.Fatalf("optimize changed the edges: %s vs %s", before, after)
	}
	if len(p.Actions[1].StateDependencies) != 3 {
		t.Fatal("optimize modified its input")
	}
}

func TestMonteCarloIsReproducible(t *testing.T) {
	p := decode(t, `{"actions":[
		{"id":"t","type":"tool_call","tool":"test","expected_effects":{"tests_passed":true}},
		{"id":"d","type":"tool_call","tool":"deploy","preconditions":[{"key":"tests_passed","value":true}],"state_dependencies":["tests_passed"],"expected_effects":{"deployed":true}},
		{"id":"n","type":"tool_call","tool":"poll","state_dependencies":["deployed"]}]}`)
	seed := uint64(42)
	trials := 2000
	params := MonteCarloParams{
		ToolSuccessRates: map[string]float64{"test": 0.9, "deploy": 1.7},
		Goal:             json.RawMessage(`{"type":"all_of","conditions":[{"type":"state_predicate","key":"deployed","value":true},{"type":"model_judge"}]}`),
		Config:           MonteCarloConfig{Seed: &seed, Trials: &trials},
	}
	monteCarlo := func() (MonteCarloResult, []byte) {
		t.Helper()
		r, err := MonteCarlo(ctxT(t), p, params, registry(t))
		if err != nil {
			t.Fatal(err)
		}
		return r, mustJSON(t, r)
	}
	r1, b1 := monteCarlo()
	if _, b2 := monteCarlo(); string(b1) != string(b2) {
		t.Fatal("same inputs and seed gave different output")
	}
	other := uint64(43)
	params.Config.Seed = &other
	if _, b3 := monteCarlo(); string(b3) == string(b1) {
		t.Fatal("a different seed gave identical output")
	}
	if r1.RateProvenance.Tools[0].Tool != "deploy" || r1.RateProvenance.Tools[0].Rate != 1 || r1.RateProvenance.Tools[0].Source != "caller" ||
		r1.RateProvenance.Tools[1].Source != "default" || r1.RateProvenance.Tools[1].Rate != 0.5 {
		t.Fatalf("provenance %+v", r1.RateProvenance)
	}
	// test at 0.9, deploy certain, poll at 0.5: about 0.9 of trials deploy,
	// about 0.45 land everything; the goal fails closed on model_judge.
	d := r1.ActionOutcomes[1]
	if d.PEffectsLanded < 0.85 || d.PEffectsLanded > 0.95 || d.PRejected < 0.05 || d.PRejected > 0.15 {
		t.Fatalf("deploy outcome %+v", d)
	}
	if r1.PAllEffectsLanded < 0.4 || r1.PAllEffectsLanded > 0.5 {
		t.Fatalf("p_all_effects_landed %v", r1.PAllEffectsLanded)
	}
	if r1.PGoalReached == nil || *r1.PGoalReached != 0 || strings.Join(r1.GoalUnderivableConditions, ",") != "model_judge" {
		t.Fatalf("goal %v %v", r1.PGoalReached, r1.GoalUnderivableConditions)
	}
	if r1.ActionOutcomes[0].MeanBlastRadius != 2 {
		t.Fatalf("a failed test blocks deploy and poll: %+v", r1.ActionOutcomes[0])
	}
	if r1.ToolCalls.Max != 3 || r1.ToolCalls.Min != 1 {
		t.Fatalf("tool calls %+v", r1.ToolCalls)
	}
}

// BenchmarkVerify runs verify on wide (independent) and deep (chained)
// proposals of 100, 1,000 and 10,000 actions; compare ns/action across sizes.
func BenchmarkVerify(b *testing.B) {
	reg := registry(b)
	for _, shape := range []string{"wide", "deep"} {
		for _, n := range []int{100, 1000, 10000} {
			b.Run(fmt.Sprintf("%s/%d", shape, n), func(b *testing.B) {
				p := &protocol.ActionProposal{ID: "p"}
				for i := 0; i < n; i++ {
					a := protocol.Action{ID: fmt.Sprint("a", i), Type: protocol.ActionToolCall, Tool: "test",
						Parameters: map[string]any{"i": i}, ExpectedEffects: map[string]any{fmt.Sprint("k", i): true}}
					if shape == "deep" && i > 0 {
						a.Dependencies = []string{fmt.Sprint("a", i-1)}
						a.Preconditions = []protocol.Precondition{{Key: fmt.Sprint("k", i-1), Operator: "exists"}}
					}
					p.Actions = append(p.Actions, a)
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if res := Verify(p, nil, reg, 100000); !res.Valid {
						b.Fatal(res.Issues[0])
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/action")
			})
		}
	}
}

func TestVerifyAndMonteCarloStayBounded(t *testing.T) {
	p := &protocol.ActionProposal{ID: "p"}
	for i := 0; i < 2000; i++ {
		p.Actions = append(p.Actions, protocol.Action{ID: fmt.Sprint("w", i), Type: protocol.ActionStateWrite, Parameters: map[string]any{"key": "k", "value": i}})
	}
	res := Verify(p, nil, nil, 100000)
	if len(res.Conflicts) != 1999 {
		t.Fatalf("2,000 unordered writers of one key: %d conflicts, want one per consecutive pair (1,999)", len(res.Conflicts))
	}
	trials := 10000
	_, err := MonteCarlo(ctxT(t), p, MonteCarloParams{Config: MonteCarloConfig{Trials: &trials}}, nil)
	if err == nil || !strings.Contains(err.Error(), "at most 5000000") {
		t.Fatalf("trials × actions over the bound: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	small := 100
	if _, err := MonteCarlo(ctx, p, MonteCarloParams{Config: MonteCarloConfig{Trials: &small}}, nil); err == nil || !strings.Contains(err.Error(), "stopped after 0 of 100 trials") {
		t.Fatalf("a cancelled run: %v", err)
	}
}
