package rpc

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestStringParam(t *testing.T) {
	cases := []struct {
		params, want, err string
	}{
		{`{"agent_id":"a1"}`, "a1", ""},
		{`{"agent_id":"a1","extra":1}`, "a1", ""},
		{`{}`, "", "param 'agent_id' is required"},
		{`{"agent_id":null}`, "", "param 'agent_id' is required"},
		{`{"agent_id":7}`, "", "param 'agent_id' must be a string"},
		{`[1]`, "", "params must be {agent_id: string}"},
		{``, "", "params are required"},
	}
	for _, tc := range cases {
		var raw *json.RawMessage
		if tc.params != "" {
			r := json.RawMessage(tc.params)
			raw = &r
		}
		got, err := stringParam(raw, "agent_id")
		if tc.err == "" && (err != nil || got != tc.want) {
			t.Fatalf("%s: %q %v, want %q", tc.params, got, err, tc.want)
		}
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Fatalf("%s: error %v, want one containing %q", tc.params, err, tc.err)
		}
	}
}
