package jsonvalue

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestValidMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{
		``, ` `, `null`, `nul`, `nullx`, `true`, `false`, `tru`, `0`, `-0`, `-`, `01`, `1.`, `1.5`, `1e`, `1e+`, `1E-7`, `-1.5e+10`, `.5`,
		`""`, `"`, `"\"`, `"\u00e9\n\t\/\b\f\r\\"`, `"\x"`, `"\u12"`, `"\u12G4"`, "\"\x01\"", "\"\xff\xfe\"", `"é"`,
		`[]`, `[`, `[1,]`, `[,1]`, `[1 2]`, `[1,2]`, `{}`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1,"b":[{}]}`, `{1:2}`,
		` {"a" : [ 1 , 2 ] } `, `{} {}`, `[] x`, "\t\r\n[]\n",
		strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
		strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000),
		strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001),
	} {
		if got, want := Valid([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("%.60q: Valid %v, json.Valid %v", s, got, want)
		}
	}
}

func TestValidDepth(t *testing.T) {
	for s, want := range map[string]int{`1`: 0, `[]`: 1, `{}`: 1, `[[],[[]]]`: 3, `{"a":{"b":[1]},"c":2}`: 3, `"[[["`: 0} {
		if got, ok := ValidDepth([]byte(s)); !ok || got != want {
			t.Errorf("%s: depth %d (%v), want %d", s, got, ok, want)
		}
	}
}

func FuzzValid(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5e-3,"x\u00e9"],"b":{"c":null}}`, `[true,false]`, `"\ud800"`, `-0.0`, `{"":""}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := Valid(data), json.Valid(data); got != want {
			t.Fatalf("%q: Valid %v, json.Valid %v", data, got, want)
		}
	})
}
