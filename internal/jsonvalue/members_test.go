package jsonvalue

import (
	"bytes"
	"encoding/json"
	"testing"
)

// membersAsDecoded fails when Members splits a valid object otherwise than
// encoding/json reads it (the last of a repeated name counting).
func membersAsDecoded(t *testing.T, data []byte) {
	t.Helper()
	var names, values [][]byte
	walked := Members(data, func(name, value []byte) bool {
		names, values = append(names, name), append(values, value)
		return true
	})
	var want map[string]json.RawMessage
	if !Valid(data) || json.Unmarshal(data, &want) != nil {
		return // not an object: Members only has to stay within data
	}
	got := map[string]json.RawMessage{}
	for i, name := range names {
		var key string
		if err := json.Unmarshal(append(append([]byte{'"'}, name...), '"'), &key); err != nil {
			t.Fatalf("%q: name %q does not unquote: %v", data, name, err)
		}
		got[key] = values[i]
	}
	if !walked || len(got) != len(want) {
		t.Fatalf("%q: walked %v, members %d, want %d", data, walked, len(got), len(want))
	}
	for k, v := range want {
		if !bytes.Equal(got[k], v) {
			t.Fatalf("%q: member %q = %s, want %s", data, k, got[k], v)
		}
	}
}

func TestMembers(t *testing.T) {
	for _, s := range []string{`{}`, ` { } `, `{"a":1}`, `{"a" : [1,{"b":"}"}] , "c\"d":"x\\"}`, `{"a":1,"a":2}`, `{"e\u0301":null}`,
		`[]`, `{`, `{"a"`, `{"a":`, `{"a":1`, `{"a":1,`, `{"a":"`, `{"a":[`, `"x"`, ``} {
		membersAsDecoded(t, []byte(s))
	}
	stop := 0
	if Members([]byte(`{"a":1,"b":2}`), func(_, _ []byte) bool { stop++; return false }) || stop != 1 {
		t.Fatal("Members went on after f returned false")
	}
}

func FuzzMembers(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5e-3,"x\u00e9"],"b":{"c":null}}`, `{"":""}`, `{"a":1,"a":{"b":[]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		membersAsDecoded(t, data)
	})
}
