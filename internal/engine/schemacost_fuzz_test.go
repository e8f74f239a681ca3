package engine

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

// FuzzSchemaCost registers any schema and validates any value against it
// under a small budget: nothing panics, and whenever the walk lets a
// validation through, it counted at least the checks the validator made.
func FuzzSchemaCost(f *testing.F) {
	f.Add(`{"type":"object","properties":{"a":{"$ref":"#"}}}`, `{"a":{"a":{}}}`)
	f.Add(`{"anyOf":[{"items":{"$ref":"#"}},{"items":{"$ref":"#"}}]}`, `[[[[1]]]]`)
	f.Add(string(doublingSchema(6)), `{}`)
	f.Add(`{"patternProperties":{"^a":{"minimum":1}},"additionalProperties":{"type":"string"}}`, `{"ab":2,"c":"d"}`)
	f.Fuzz(func(t *testing.T, schema, value string) {
		if !json.Valid([]byte(schema)) || !json.Valid([]byte(value)) {
			return
		}
		r := NewToolRegistry(0, SchemaLimits{MaxEvaluations: 10_000, MaxExpansion: 200})
		if _, err := r.Register([]protocol.ToolSchema{{Name: "t", Parameters: json.RawMessage(schema)}}); err != nil {
			return
		}
		tool, _ := r.Lookup("t")
		if tool.validator == nil {
			return
		}
		var v any
		if err := json.Unmarshal([]byte(value), &v); err != nil {
			return
		}
		w := costWalk{ctx: context.Background(), budget: tool.evalBudget}
		err := w.eval(tool.validator, v)
		if errors.Is(err, errOverBudget) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := countedChecks(t, schema, v); got > w.spent {
			t.Fatalf("the validator made %d checks, the walk counted %d", got, w.spent)
		}
		_ = tool.ValidateParams(context.Background(), v)
	})
}
