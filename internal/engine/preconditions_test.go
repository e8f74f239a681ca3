package engine

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/protocol"
)

func TestPreconditions(t *testing.T) {
	num := func(s string) any { return json.Number(s) }
	cases := []struct {
		op      string
		state   any
		present bool
		value   any
		ok      bool
	}{
		{"eq", num("1"), true, 1.0, true},
		{"eq", num("1"), true, num("2"), false},
		{"eq", nil, false, nil, false},
		{"eq", map[string]any{"a": num("1")}, true, map[string]any{"a": 1.0}, true},
		{"neq", "x", true, "y", true},
		{"neq", nil, false, "y", true},
		{"gt", num("5"), true, num("4"), true},
		{"gt", "5", true, num("4"), false}, // numeric operators need numbers
		{"lt", num("3"), true, num("4"), true},
		{"gte", num("4"), true, num("4"), true},
		{"lte", num("4.5"), true, num("4"), false},
		{"exists", nil, true, nil, true},
		{"exists", nil, false, nil, false},
		{"not_exists", nil, false, nil, true},
		{"contains", "release notes", true, "notes", true},
		{"contains", []any{"a", num("2")}, true, 2.0, true},
		{"contains", []any{"a"}, true, "b", false},
		{"eq", num("9007199254740993"), true, num("9007199254740992"), false}, // beyond float precision
	}
	for _, tc := range cases {
		err := checkPrecondition(protocol.Precondition{Key: "k", Operator: tc.op, Value: tc.value}, tc.state, tc.present)
		if (err == nil) != tc.ok {
			t.Errorf("%s %v (present %v) vs %v: got %v, want ok=%v", tc.op, tc.state, tc.present, tc.value, err, tc.ok)
		}
	}
	err := checkPrecondition(protocol.Precondition{Key: "k", Operator: "like"}, "x", true)
	if err == nil || !strings.Contains(err.Error(), "unknown operator 'like'") {
		t.Fatalf("unknown operator: %v", err)
	}
}

func TestInterpolate(t *testing.T) {
	outputs := map[string]any{"a1": map[string]any{"items": []any{map[string]any{"name": "n"}}, "count": json.Number("2")}}
	results := map[string]any{"s1": map[string]any{"exit": json.Number("0")}}
	lookup := func(id string, result bool) (any, bool) {
		if result {
			v, ok := results[id]
			return v, ok
		}
		v, ok := outputs[id]
		return v, ok
	}
	cases := []struct {
		in   any
		want string
		err  string
	}{
		{"$a1.output.count", `2`, ""},
		{"$a1.output.items.0", `{"name":"n"}`, ""},
		{"n=$a1.output.count!", `"n=2!"`, ""},
		{"$a1.output.items", `[{"name":"n"}]`, ""},
		{"cost: $5", `"cost: $5"`, ""},
		{"$a1.output.nope", ``, "has no field 'nope'"},
		{"$a1.output.count.x", ``, "not an object or array"},
		{"$zz.output", ``, "action 'zz' has no output"},
		{"$s1.result.exit", `0`, ""},
		{"exit=$s1.result.exit", `"exit=0"`, ""},
		{"$a1.result", ``, `action 'a1' has no stream result; an action reads it after await: ["a1"]`},
		{"$s1.result.nope", ``, "$s1.result has no field 'nope'"},
	}
	for _, tc := range cases {
		got, err := interpolate(tc.in, lookup, nil)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: want error %q, got %v", tc.in, tc.err, err)
			}
			continue
		}
		if err != nil || string(jsonvalue.Canonical(got)) != tc.want {
			t.Errorf("%v: got %s (%v), want %s", tc.in, jsonvalue.Canonical(got), err, tc.want)
		}
	}
}

func TestLevels(t *testing.T) {
	acts := []protocol.Action{
		{ID: "a", Type: protocol.ActionToolCall},
		{ID: "b", Type: protocol.ActionToolCall, ExpectedEffects: map[string]any{"k": 1}},
		{ID: "c", Type: protocol.ActionToolCall, StateDependencies: []string{"k"}},
		{ID: "d", Type: protocol.ActionToolCall, Parameters: map[string]any{"x": "$a.output"}, Dependencies: []string{"c"}},
		{ID: "e", Type: protocol.ActionToolCall, Dependencies: []string{"zz"}},
	}
	g := buildGraph(acts)
	got := string(jsonvalue.Canonical(g.levels()))
	if got != `[["a","b"],["c"],["d"]]` {
		t.Fatalf("levels %s", got)
	}
	if g.rejected[4] == "" {
		t.Fatal("e depends on an unknown id and must be rejected")
	}
}
