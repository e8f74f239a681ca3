package jsonvalue

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/internal/allocs"
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

func TestEqualNumbersByExactValue(t *testing.T) {
	n := func(s string) any { return json.Number(s) }
	cases := []struct {
		a, b any
		eq   bool
	}{
		{n("1E700"), n("1E700"), true},
		{n("1E700"), n("10e699"), true},
		{n("1e+700"), n("1E700"), true},
		{n("1E700"), n("1E701"), false},
		{n("-1e-700"), n("-0.1e-699"), true},
		{n("0"), n("-0.000"), true},
		{n("0e5"), 0.0, true},
		{n("1.5"), 1.5, true},
		{n("0.1"), 0.1, true},
		{n("100"), n("1e2"), true},
		{n("12"), n("21"), false},
		{n("-1"), n("1"), false},
		{int64(7), n("7.0"), true},
		{uint64(18446744073709551615), n("18446744073709551615"), true},
		{n("1e9223372036854775807"), n("1e9223372036854775807"), true},
		{n("1e99999999999999999999"), n("1e+099999999999999999999"), true},
		{n("1e99999999999999999999"), n("1e99999999999999999998"), false},
	}
	for _, tc := range cases {
		if got := Equal(tc.a, tc.b); got != tc.eq {
			t.Errorf("Equal(%#v, %#v) = %v, want %v", tc.a, tc.b, got, tc.eq)
		}
		if got := Equal(tc.b, tc.a); got != tc.eq {
			t.Errorf("Equal(%#v, %#v) = %v, want %v", tc.b, tc.a, got, tc.eq)
		}
	}
}

// A comparison of a huge number allocates about its own size, not the
// hundreds of megabytes exact rational arithmetic took.
func TestEqualHugeNumberIsCheap(t *testing.T) {
	digits := json.Number("1." + strings.Repeat("7", 400_000))
	other := json.Number("1." + strings.Repeat("7", 400_000))
	var eq bool
	got := allocs.Bytes(func() { eq = Equal(digits, other) })
	if !eq {
		t.Fatal("a 400,000-digit number is not equal to itself")
	}
	if got > 8*400_000 {
		t.Fatalf("comparing two 400,000-digit numbers allocated %d bytes, want at most %d", got, 8*400_000)
	}
}

// BenchmarkEqualHugeNumber is the hostile-input row for number equality.
func BenchmarkEqualHugeNumber(b *testing.B) {
	a := json.Number("1." + strings.Repeat("7", 400_000))
	c := json.Number("1." + strings.Repeat("7", 400_000))
	for b.Loop() {
		if !Equal(a, c) {
			b.Fatal("not equal")
		}
	}
}
