package jsonvalue

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

// appendMatchesMarshal fails when Append writes anything but what
// json.Marshal writes, or errs where it does not.
func appendMatchesMarshal(t *testing.T, v any) {
	t.Helper()
	want, wantErr := json.Marshal(v)
	got, err := Append([]byte("prefix"), v)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%#v: Append error %v, json.Marshal error %v", v, err, wantErr)
	}
	if err == nil && !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("%#v:\n Append       %s\n json.Marshal prefix%s", v, got, want)
	}
}

func TestAppendMatchesMarshal(t *testing.T) {
	type typed struct {
		A int `json:"a"`
	}
	deep := any("leaf")
	for range 600 {
		deep = []any{deep}
	}
	for _, v := range []any{
		nil, true, false, "", "plain", `q"b\s`, "<a&b>", "tab\tnl\nret\rbs\bff\f\x00\x1f\x7f",
		"\u00e9\u2028\u2029\U0001F600", "bad \xff utf8 \xed\xa0\x80", "\xe2\x80",
		json.Number("12"), json.Number("-0.5e+10"), json.Number(""), json.Number("1.5e"), json.Number("01"), json.Number("x"),
		0.0, 1.0, -1.5, 1e-7, 1e21, 123456789012345678901234.0, 1e-6, 5e-324, math.MaxFloat64, math.Inf(1), math.NaN(),
		3, int64(-7), float32(1.5), uint8(3), []string{"a", "<b>", ""}, []string{}, []string(nil), map[string]any{"deps": []string{"x"}},
		map[string]string{"b": "<x>", "a": ""}, map[string]string(nil), map[string]bool{"ok": true, "no": false}, map[string]bool{}, typed{A: 1}, &typed{A: 2}, map[string]int{"b": 1, "a": 2},
		map[string]any(nil), []any(nil), map[string]any{}, []any{},
		map[string]any{"z": 1.0, "a": []any{json.Number("2"), "x", nil, map[string]any{"k<": true}}, "": false, "é": "u"},
		map[string]any{"k0": 0, "k1": 1, "k2": 2, "k3": 3, "k4": 4, "k5": 5, "k6": 6, "k7": 7, "k8": 8, "k9": 9,
			"k10": 10, "k11": 11, "k12": 12, "k13": 13, "k14": 14, "k15": 15, "k16": 16, "k17": 17},
		[]any{math.NaN()}, map[string]any{"bad": json.Number("1x")}, deep,
	} {
		appendMatchesMarshal(t, v)
	}
}

func FuzzAppend(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5,"x<y"],"b":{"c":null}}`, `"\u2028"`, `-0.0000001`, `[1e400]`, `{"":true}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var asFloat any
		if json.Unmarshal(data, &asFloat) == nil {
			appendMatchesMarshal(t, asFloat)
		}
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		var asNumber any
		if d.Decode(&asNumber) == nil {
			appendMatchesMarshal(t, asNumber)
		}
		appendMatchesMarshal(t, string(data)) // any bytes, as a string
	})
}
