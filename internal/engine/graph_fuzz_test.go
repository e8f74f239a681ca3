package engine

import (
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

var graphSeeds = []string{
	`{"actions":[{"id":"a","type":"state_write","parameters":{"key":"k","value":1}},{"id":"b","type":"state_read","state_dependencies":["k"]}]}`,
	`{"actions":[{"id":"a","type":"state_read","dependencies":["b"]},{"id":"b","type":"state_read","dependencies":["a"]}]}`,
	`{"actions":[{"id":"a","type":"state_read","dependencies":["a"]}]}`,
	`{"actions":[{"id":"a","type":"tool_call","tool":"t","expected_effects":{"k":1}},{"id":"b","type":"tool_call","tool":"t","expected_effects":{"k":2}}]}`,
	`{"actions":[{"id":"a","type":"state_write","parameters":{"key":"k","value":{"x":[1]}}},{"id":"b","type":"state_write","parameters":{"key":"j","value":"$a.output.x.0"}}]}`,
	`{"actions":[{"id":"a","type":"assertion","preconditions":[{"key":"k","operator":"eq","value":1E700}]},{"id":"a","type":"state_read"}]}`,
	`{"actions":[{"id":"b","type":"state_read","parameters":{"p":"$zz.output"}}]}`,
}

// FuzzGraph: a cycle is reported exactly when one exists; levels are
// topological; verify, simulate and optimize finish; equivalent(p, p).
func FuzzGraph(f *testing.F) {
	for _, s := range graphSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := protocol.DecodeProposal(raw)
		if err != nil || len(p.Actions) > 64 {
			return
		}
		Normalize(p)
		g := buildGraph(p.Actions)
		all := make([]int, len(p.Actions))
		for i := range all {
			all[i] = i
		}
		reach := newReachability(g, all)
		for i := range p.Actions {
			// An action on a cycle is rejected: as on a cycle, unless an
			// earlier reason (a duplicate id) already rejected it.
			onCycle := reach.reaches(i, i)
			said := strings.Contains(g.rejected[i], "cycle") || strings.Contains(g.rejected[i], "depends on itself")
			if (said && !onCycle) || (onCycle && g.rejected[i] == "") {
				t.Fatalf("action %d on a cycle: %v; rejected: %q", i, onCycle, g.rejected[i])
			}
		}
		level := map[string]int{}
		for l, ids := range g.levels() {
			for _, id := range ids {
				level[id] = l
			}
		}
		for i, deps := range g.deps {
			if g.rejected[i] != "" {
				continue
			}
			for _, d := range deps {
				if level[p.Actions[d].ID] >= level[p.Actions[i].ID] {
					t.Fatalf("levels are not topological: %s (level %d) depends on %s (level %d)",
						p.Actions[i].ID, level[p.Actions[i].ID], p.Actions[d].ID, level[p.Actions[d].ID])
				}
			}
		}
		Verify(p, nil, nil, 0)
		Simulate(p, nil, nil)
		opt, _ := Optimize(p)
		if eq := Equivalent(p, p, nil, nil); !eq.Equivalent {
			t.Fatalf("equivalent(p, p) is false: %+v", eq.Differences)
		}
		if eq := Equivalent(p, opt, nil, nil); !eq.Equivalent {
			t.Fatalf("equivalent(p, optimize(p)) is false: %+v", eq.Differences)
		}
	})
}

// FuzzInterpolate: resolving an action's references reads only the outputs
// of actions the graph has it depend on.
func FuzzInterpolate(f *testing.F) {
	for _, s := range graphSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := protocol.DecodeProposal(raw)
		if err != nil || len(p.Actions) > 64 {
			return
		}
		Normalize(p)
		g := buildGraph(p.Actions)
		for i := range p.Actions {
			if g.rejected[i] != "" || !g.hasRefs[i] {
				continue
			}
			deps := map[string]bool{}
			for _, d := range g.deps[i] {
				deps[p.Actions[d].ID] = true
			}
			outputs := func(id string, _ bool) (any, bool) {
				if !deps[id] {
					t.Fatalf("action %s read the output of %s, which it does not depend on", p.Actions[i].ID, id)
				}
				return map[string]any{"x": []any{"v"}}, true
			}
			budget := &resolveBudget{action: p.Actions[i].ID, left: 1 << 20, limit: 1 << 20}
			_, _ = interpolate(any(p.Actions[i].Parameters), outputs, budget)
			_, _ = interpolate(any(p.Actions[i].ExpectedEffects), outputs, budget)
		}
	})
}
