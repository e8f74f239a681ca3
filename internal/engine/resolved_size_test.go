package engine

import (
	"encoding/json"
	"fmt"
	"math"
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

// A chain of state_writes that each hold the previous output twice is
// rejected at the first action whose parameters, summed from the outputs'
// sizes, pass the bound; the output sizes are known from the resolution,
// and one past the bound is never built.
func TestDoublingStateWritesStopAtTheFirstActionPastTheBound(t *testing.T) {
	const limit = 64 << 10
	res, _ := submitMeasured(t, Options{MaxResolvedActionBytes: limit}, refDoubling(40))
	var last int64
	for i, r := range res.Results {
		if r.Status == protocol.StatusSucceeded {
			last = jsonvalue.Size(r.Output, math.MaxInt64)
			continue
		}
		if r.Status != protocol.StatusRejected || i == 0 {
			t.Fatalf("action %s: %s %q", r.ActionID, r.Status, r.ErrorText())
		}
		// The value of this action is two copies of the last output.
		if 2*last <= limit-64 || last > limit {
			t.Fatalf("action %s was rejected with the last output at %d bytes; the bound is %d", r.ActionID, last, limit)
		}
		return
	}
	t.Fatal("no action was rejected")
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
