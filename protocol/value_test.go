package protocol

import (
	"bytes"
	"reflect"
	"testing"
)

// parseValue decodes as encoding/json with UseNumber does.
func sameAsDecoder(t *testing.T, raw []byte) {
	t.Helper()
	var want any
	wantErr := strictDecode(raw, &want)
	got, err := DecodeValue(raw)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%q: error %v, the decoder's %v", raw, err, wantErr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\n got  %#v\n want %#v", raw, got, want)
	}
}

func TestDecodeValueMatchesDecoder(t *testing.T) {
	for _, s := range []string{
		`null`, `true`, `false`, `0`, `-1.5e+10`, `1E700`, `"s"`, `""`, `"é\u00e9\n\"<"`, `"\ud800"`, "\"bad \xff\"",
		` { "b" : [ 1 , "x" , null , { } , [ ] ] , "a" : { "c" : true } , "a" : 2 } `,
		`[[[[]]]]`, `{"":{"":""}}`, `[1 2]`, `{"a":1} x`, `{"a":}`, `01`, `"unterminated`,
	} {
		sameAsDecoder(t, []byte(s))
	}
}

func FuzzParseValue(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5,"x"],"b":{"c":null}}`, `"\u2028"`, `-0.0000001`, `[1e400]`, `{"":true}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(bytes.TrimSpace(raw)) > 0 { // empty input is null by definition
			sameAsDecoder(t, raw)
		}
	})
}
