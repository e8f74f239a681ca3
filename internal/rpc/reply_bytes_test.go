package rpc

import (
	"encoding/json"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

// TestRepliesKeepTheirMemberOrder pins the bytes of replies that were once
// maps, whose members encoding/json sorted: the structs that replace them
// keep that order.
func TestRepliesKeepTheirMemberOrder(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t, "")
	raw := func(method string, params any) string {
		t.Helper()
		var out json.RawMessage
		if err := c.Call(ctxT(t), method, params, &out); err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		return string(out)
	}
	var open protocol.SessionPolicyOpenResult
	if err := c.Call(ctxT(t), protocol.MethodSessionPolicyOpen, nil, &open); err != nil {
		t.Fatal(err)
	}
	raw(protocol.MethodPolicyRegister, map[string]any{"name": "p", "rule": "deny_tool", "target": "rm", "session_id": open.SessionID})
	for _, tc := range []struct {
		method string
		params any
		want   string
	}{
		{protocol.MethodPolicyUnregister, map[string]any{"name": "p", "session_id": open.SessionID},
			`{"removed":1,"scope":{"session_id":"` + open.SessionID + `"},"unregistered":"p"}`},
		{protocol.MethodPolicyUnregister, map[string]any{"name": "p"}, `{"removed":0,"scope":"global","unregistered":"p"}`},
		{protocol.MethodSessionPolicyClose, map[string]any{"session_id": open.SessionID}, `{"closed":true}`},
	} {
		if got := raw(tc.method, tc.params); got != tc.want {
			t.Errorf("%s answered %s, want %s", tc.method, got, tc.want)
		}
	}
}
