package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/protocol"
)

// The size of a resolved value is summed from its parts as it is built, a
// whole reference counting its output's known size; it must be the count a
// walk of the built value gives, or a bound would depend on which of the two
// counted it.
func TestResolvedSizeIsTheSizeOfWhatWasBuilt(t *testing.T) {
	outputs := map[string]any{
		"a": map[string]any{"l": []any{"x", json.Number("1.5"), true, nil}, "<r>": "q\"uote"},
		"b": []any{},
	}
	lookup := func(id string, _ bool) (any, bool) { v, ok := outputs[id]; return v, ok }
	walked := 0
	known := func(_ string, _ bool, v any) int64 { walked++; return jsonvalue.Size(v, math.MaxInt64) }
	for _, in := range []any{
		"$a.output",
		[]any{"$a.output", "$a.output", "$b.output"},
		map[string]any{"k": "$a.output.l", "s": "text $a.output and $b.output.", "n": json.Number("7")},
		map[string]any{"deep": []any{map[string]any{"x": "$a.output"}, "$a.output.<r>"}},
	} {
		t.Run(fmt.Sprint(in), func(t *testing.T) {
			budget := &resolveBudget{action: "t", left: 1 << 20, limit: 1 << 20, known: known}
			got, size, err := resolveValue(in, lookup, budget)
			if err != nil {
				t.Fatal(err)
			}
			if want := jsonvalue.Size(got, math.MaxInt64); size != want {
				t.Fatalf("summed size %d, the built value counts %d", size, want)
			}
		})
	}
	if walked == 0 {
		t.Fatal("no whole reference asked for its output's known size")
	}
}

// What the proposal alone tells of a state_write's output is its size
// exactly when everything it is built from is known, whole outputs and
// their fields, and a lower bound when it embeds references in text.
func TestKnownSizesAreTheSizesTheRunBuilds(t *testing.T) {
	p := refDoubling(12)
	acts := append(p.Actions,
		protocol.Action{ID: "m", Type: protocol.ActionStateWrite, Parameters: map[string]any{"key": "m", "value": map[string]any{
			"<list>": []any{"$a3.output", json.Number("-1.5e3"), nil, false, "q\"uote\u2028", map[string]any{}, []any{}},
			"n":      "$a11.output",
			"list":   []any{"$a2.output", "é", json.Number("3")},
		}}},
		protocol.Action{ID: "s", Type: protocol.ActionStateWrite, Parameters: map[string]any{"key": "s", "value": "<$m.output> and $a2.output, $a0.output"}},
		protocol.Action{ID: "w", Type: protocol.ActionStateWrite, Parameters: map[string]any{"key": "w", "value": "$s.output"}},
		protocol.Action{ID: "f", Type: protocol.ActionStateWrite, Parameters: map[string]any{"key": "f", "value": map[string]any{
			"x": []any{"$a3.output", "$m.output.list.0", "$a6.output.r", map[string]any{"z": "$a5.output.l"}}, "y": "$m.output.list",
		}}},
		protocol.Action{ID: "g", Type: protocol.ActionStateWrite, Parameters: map[string]any{"key": "g", "value": []any{"$f.output.x", "$f.output.x.3.z", "$f.output.x.1"}}},
		protocol.Action{ID: "h", Type: protocol.ActionStateWrite, Parameters: map[string]any{"key": "h", "value": []any{"$m.output.n.r", "$g.output.0"}}},
		protocol.Action{ID: "t", Type: protocol.ActionStateWrite, Parameters: map[string]any{"key": "t", "value": "x$a0.output<y"}},
		protocol.Action{ID: "e", Type: protocol.ActionStateWrite, Parameters: map[string]any{"key": "e", "value": "<\u2028$t.output> & \"$t.output\"$a0.output"}},
	)
	p.Actions = acts
	res, _ := submitMeasured(t, Options{}, p)
	g := buildGraph(acts)
	k := newKnownSizer(g, math.MaxInt64)
	sorted, _ := g.order()
	for _, i := range sorted {
		k.action(i)
	}
	for i, r := range res.Results {
		if r.Status != protocol.StatusSucceeded {
			t.Fatalf("%s: %s %q", r.ActionID, r.Status, r.ErrorText())
		}
		built := jsonvalue.Size(r.Output, math.MaxInt64)
		switch id := acts[i].ID; id {
		case "s", "w", "h": // an object's JSON inside text, a field through a reference: at most what was built
			if k.outputSize(i) > built || k.outputSize(i) < 40 {
				t.Errorf("%s: known %d, built %d", id, k.outputSize(i), built)
			}
		default:
			if k.outputSize(i) != built {
				t.Errorf("%s: known %d, built %d", id, k.outputSize(i), built)
			}
		}
	}
}

// The refusal before running is only ever of a proposal the run would
// refuse: on random proposals of state_writes and tool calls referring to
// one another, whole, in text and as fields, whenever the known sizes pass
// a bound, the run (without that refusal) rejects some action for its
// resolved size, and the action named does not succeed; and every known
// output size is at most the size of the output built.
func TestKnownSizesRefuseOnlyWhatTheRunRefuses(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 30))
	refused := 0
	for round := 0; round < 300; round++ {
		acts := randomReferringActions(rng, 2+rng.IntN(10))
		actionLimit, proposalLimit := int64(50+rng.IntN(4000)), int64(100+rng.IntN(16000))
		staticErr := knownSizes(buildGraph(acts), actionLimit, proposalLimit)

		rt, s := openRuntime(t, Options{MaxResolvedActionBytes: actionLimit, MaxResolvedProposalBytes: proposalLimit}, &countingExecutor{}, "t")
		if _, ok := rt.gates[0].(resolvedSizeGate); !ok {
			t.Fatalf("the first gate is %s", rt.gates[0].Name())
		}
		rt.gates = rt.gates[1:]
		res, err := rt.Submit(ctxT(t), &Submission{Proposal: &protocol.ActionProposal{Actions: acts}, Session: s})
		if err != nil {
			t.Fatal(err)
		}
		g := buildGraph(acts)
		k := newKnownSizer(g, math.MaxInt64)
		sorted, _ := g.order()
		for _, i := range sorted {
			k.action(i)
		}
		for i, r := range res.Results {
			if built := jsonvalue.Size(r.Output, math.MaxInt64); r.Status == protocol.StatusSucceeded && k.outputSize(i) > built {
				t.Fatalf("round %d: %s built an output of %d bytes, known as at least %d", round, r.ActionID, built, k.outputSize(i))
			}
		}
		if staticErr == nil {
			continue
		}
		refused++
		bySize, otherwise := false, false
		for _, r := range res.Results {
			sized := strings.Contains(r.ErrorText(), "max_resolved_")
			bySize = bySize || sized
			otherwise = otherwise || (r.Status == protocol.StatusRejected || r.Status == protocol.StatusFailed) && !sized
			// An action's own size does not depend on what else ran.
			named := strings.Contains(staticErr.Error(), "action '"+r.ActionID+"' would pass")
			if named && r.Status == protocol.StatusSucceeded {
				t.Fatalf("round %d: refused before running (%v), but %s succeeds when run", round, staticErr, r.ActionID)
			}
		}
		// The run refuses for size unless something failed for another
		// reason first, and what depends on it never ran.
		if !bySize && !otherwise {
			t.Fatalf("round %d: refused before running (%v), but the run refuses nothing for its size: %+v", round, staticErr, res.Results)
		}
	}
	if refused < 30 {
		t.Fatalf("only %d of 300 random proposals were refused: the test exercises too little", refused)
	}
}

// randomReferringActions: n actions a0..a(n-1), each a state_write or a
// call of tool t (which echoes its parameters), whose parameters refer to
// earlier outputs whole, inside text or by field; every failure is
// skipped so that the rest still runs.
func randomReferringActions(rng *rand.Rand, n int) []protocol.Action {
	acts := make([]protocol.Action, n)
	for i := range acts {
		ref := func() string { return fmt.Sprintf("$a%d.output", rng.IntN(max(i, 1))) }
		var value func(depth int) any
		value = func(depth int) any {
			switch c := rng.IntN(10); {
			case i > 0 && c < 3:
				return ref()
			case i > 0 && c == 3:
				return "<" + ref() + " & " + ref() + ">"
			case i > 0 && c == 4:
				return ref() + ".v" // a field: known only when run
			case depth < 3 && c < 7:
				l := make([]any, rng.IntN(4))
				for j := range l {
					l[j] = value(depth + 1)
				}
				if c == 5 {
					return l
				}
				m := map[string]any{}
				for j := range l {
					m[fmt.Sprintf("k\"%d", j)] = l[j]
				}
				if len(l) > 0 {
					m["v"] = l[0] // what a field reference reads
				}
				return m
			case c == 7:
				return json.Number("31.5")
			default:
				return strings.Repeat("é<", rng.IntN(40))
			}
		}
		a := protocol.Action{ID: fmt.Sprintf("a%d", i), FailureBehavior: protocol.FailSkip}
		if rng.IntN(4) == 0 {
			a.Type, a.Tool, a.Parameters = protocol.ActionToolCall, "t", map[string]any{"v": value(0)}
		} else {
			a.Type, a.Parameters = protocol.ActionStateWrite, map[string]any{"key": a.ID, "value": value(0)}
		}
		if rng.IntN(5) == 0 {
			a.ExpectedEffects = map[string]any{"e" + a.ID: value(1)}
		}
		acts[i] = a
	}
	return acts
}

// A string built from text and references is escaped as a whole: an
// embedded object's quotes and the text's < grow. What is charged is at
// least the size of what was built.
func TestAnEmbeddingStringIsChargedWhatItBuilds(t *testing.T) {
	outputs := map[string]any{"a": []any{"", "", "", "", "", "", "", ""}}
	lookup := func(id string, _ bool) (any, bool) { v, ok := outputs[id]; return v, ok }
	for _, in := range []any{"in $a.output out", "<<<<<<<<<<<<<<<< $a.output"} {
		budget := &resolveBudget{action: "t", left: 1 << 20, limit: 1 << 20}
		got, size, err := resolveValue(in, lookup, budget)
		if err != nil {
			t.Fatal(err)
		}
		if charged := int64(1<<20) - budget.left; charged < size || size != jsonvalue.Size(got, math.MaxInt64) {
			t.Errorf("%q: built %d bytes (%s), charged %d", in, size, got, charged)
		}
	}
}

// Doubling 200 times passes every int64: the known sizes saturate at the
// largest one rather than wrap to a negative size that passes no bound.
func TestKnownSizesSaturate(t *testing.T) {
	err := knownSizes(buildGraph(refDoubling(200).Actions), math.MaxInt64-1, math.MaxInt64)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("at least %d,", int64(math.MaxInt64))) ||
		!strings.Contains(err.Error(), "(max_resolved_action_bytes)") {
		t.Fatalf("200 doublings against the largest bound: %v", err)
	}
}

// A chain that doubles through a field of the last output, each value
// {"x": [$prev.output.x, $prev.output.x]}, is known from the proposal as
// the whole-output chain is: refused before any action runs.
func TestAChainDoublingThroughFieldsIsRefusedBeforeItRuns(t *testing.T) {
	acts := []protocol.Action{{ID: "a0", Type: protocol.ActionStateWrite, Parameters: map[string]any{"key": "k0", "value": map[string]any{"x": "0123456789"}}}}
	for i := 1; i < 40; i++ {
		prev := fmt.Sprintf("$a%d.output.x", i-1)
		acts = append(acts, protocol.Action{ID: fmt.Sprintf("a%d", i), Type: protocol.ActionStateWrite,
			Parameters: map[string]any{"key": fmt.Sprintf("k%d", i), "value": map[string]any{"x": []any{prev, prev}}}})
	}
	res, _, rt := submitMeasuredOn(t, Options{MaxResolvedActionBytes: 1 << 20}, &protocol.ActionProposal{Actions: acts})
	refusedWhole(t, res, "would pass more than 1048576 bytes", "max_resolved_action_bytes")
	if keys := stateKeys(t, rt, ""); len(keys) != 0 {
		t.Fatalf("the refused proposal wrote %v", keys)
	}
}

// 10,000 references to one 1 MB field count it once: the field's size is
// known after one walk, and each further reference is a lookup.
func TestAFieldReferredToOftenIsCountedOnce(t *testing.T) {
	refs := make([]any, 10_000)
	for i := range refs {
		refs[i] = "$a.output.s"
	}
	g := buildGraph([]protocol.Action{
		{ID: "a", Type: protocol.ActionStateWrite, Parameters: map[string]any{"key": "a", "value": map[string]any{"s": strings.Repeat("x", 1<<20)}}},
		{ID: "b", Type: protocol.ActionStateWrite, Parameters: map[string]any{"key": "b", "value": refs}},
	})
	k := newKnownSizer(g, math.MaxInt64)
	k.action(0)
	if charge := k.action(1); charge < 10_000*(1<<20) {
		t.Fatalf("10,000 references to a 1 MiB field charged %d", charge)
	}
	if len(k.fields) != 1 {
		t.Fatalf("%d fields counted, want the one", len(k.fields))
	}
}
