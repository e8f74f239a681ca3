package jsonvalue

import (
	"encoding/json"
	"testing"
)

func TestEqual(t *testing.T) {
	n := func(s string) any { return json.Number(s) }
	cases := []struct {
		a, b any
		eq   bool
	}{
		{n("1"), 1.0, true},
		{n("1.0"), n("1"), true},
		{n("9007199254740993"), n("9007199254740992"), false},
		{"1", n("1"), false},
		{nil, nil, true},
		{nil, false, false},
		{[]any{n("1"), "a"}, []any{1.0, "a"}, true},
		{[]any{"a"}, []any{"a", "b"}, false},
		{map[string]any{"k": n("2")}, map[string]any{"k": 2.0}, true},
		{map[string]any{"k": 1.0}, map[string]any{"j": 1.0}, false},
		{true, true, true},
	}
	for _, tc := range cases {
		if got := Equal(tc.a, tc.b); got != tc.eq {
			t.Errorf("Equal(%#v, %#v) = %v", tc.a, tc.b, got)
		}
	}
}

func TestStringAndCanonical(t *testing.T) {
	if String([]any{"ls && rm <x>"}) != `["ls && rm <x>"]` {
		t.Fatalf("HTML escaping hides characters from substring rules: %s", String([]any{"ls && rm <x>"}))
	}
	if String("plain") != "plain" || String(map[string]any{"b": 1.0, "a": "x"}) != `{"a":"x","b":1}` || String(json.Number("3.50")) != "3.50" {
		t.Fatal("string forms")
	}
}
