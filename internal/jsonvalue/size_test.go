package jsonvalue

import (
	"encoding/json"
	"math"
	"testing"
)

func TestSizeIsTheEncodedLength(t *testing.T) {
	for _, v := range []any{
		"plain", `quote " and \ and <&>` + "\n", json.Number("12.50"), true, nil,
		[]any{1.5, -3, int64(math.MinInt64), uint64(math.MaxUint64), "x"},
		map[string]any{"a": map[string]any{"b<": []any{}}, "c": 0.1, "d": int64(42)},
		struct{ X int }{7},
	} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := Size(v, math.MaxInt64); got != int64(len(b)) {
			t.Errorf("Size(%#v) = %d, want %d (%s)", v, got, len(b), b)
		}
	}
	if got := Size([]any{"0123456789", "0123456789"}, 5); got <= 5 {
		t.Errorf("past the limit, Size says more than the limit; got %d", got)
	}
}

// StringSize counts what AppendString writes, for the characters it
// escapes in other than one byte each.
func TestStringSizeIsWhatAppendStringWrites(t *testing.T) {
	for _, s := range []string{"\b\f", "line\u2028para\u2029", "bad \xff\xfe utf-8", "é€😀", "\x01\x1f"} {
		if got, want := StringSize(s), int64(len(AppendString(nil, s))); got != want {
			t.Errorf("StringSize(%q) = %d, AppendString wrote %d", s, got, want)
		}
	}
}
