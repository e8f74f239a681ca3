package rpc

import (
	"context"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/protocol"
)

func TestCapabilitiesNarrowButNeverWiden(t *testing.T) {
	ts := startServer(t, Options{HostToken: "host-secret"})
	tb := newToolbox(t, ts, map[string]toolFunc{"read_file": echo, "read_dir": echo, "shell": echo})
	var got protocol.CapabilitySet
	mustCall(t, tb, protocol.MethodSessionCapabilitiesGet, nil, &got)
	if got.Tools != nil || got.StateKeys != nil || got.MaxActions != 0 {
		t.Fatalf("a new connection is unrestricted, got %+v", got)
	}
	mustCall(t, tb, protocol.MethodSessionCapabilitiesSet, map[string]any{"tools": []string{"read_*"}, "state_keys": []string{"notes/*"}, "max_actions": 3}, &got)
	// Narrower: one tool of the prefix, and fewer actions.
	mustCall(t, tb, protocol.MethodSessionCapabilitiesSet, map[string]any{"tools": []string{"read_file"}, "max_actions": 2}, &got)
	mustCall(t, tb, protocol.MethodSessionCapabilitiesGet, nil, &got)
	if strings.Join(got.Tools, ",") != "read_file" || strings.Join(got.StateKeys, ",") != "notes/*" || got.MaxActions != 2 {
		t.Fatalf("after narrowing: %+v", got)
	}
	for _, wider := range []map[string]any{
		{"tools": []string{"read_*"}},
		{"tools": []string{"shell"}},
		{"state_keys": []string{"*"}},
		{"max_actions": 3},
	} {
		err := tb.Call(ctxT(t), protocol.MethodSessionCapabilitiesSet, wider, nil)
		if code, msg := rpcCode(t, err); code != protocol.CodeApprovalDenied || !strings.Contains(msg, "would widen") || !strings.Contains(msg, "new connection") {
			t.Fatalf("widening with %v: %d %s", wider, code, msg)
		}
	}

	res := tb.submit(t, proposal(toolCall("sh", "shell", map[string]any{"cmd": "ls"})))
	if st := resultOf(t, res, "sh"); st.Status != protocol.StatusRejected || !strings.Contains(st.ErrorText(), "capability gate") || !strings.Contains(st.ErrorText(), "tool 'shell'") {
		t.Fatalf("a tool outside the set: %+v %s", st, st.ErrorText())
	}
	res = tb.submit(t, proposal(map[string]any{"id": "w", "type": "state_write", "parameters": map[string]any{"key": "config/x", "value": 1}}))
	if st := resultOf(t, res, "w"); st.Status != protocol.StatusRejected || !strings.Contains(st.ErrorText(), "state key 'config/x'") {
		t.Fatalf("a key outside the set: %s", st.ErrorText())
	}
	res = tb.submit(t, proposal(
		toolCall("r1", "read_file", map[string]any{}), toolCall("r2", "read_file", map[string]any{}), toolCall("r3", "read_file", map[string]any{})))
	if st := resultOf(t, res, "r1"); st.Status != protocol.StatusRejected || !strings.Contains(st.ErrorText(), "max_actions") {
		t.Fatalf("more actions than max_actions: %s", st.ErrorText())
	}
	res = tb.submit(t, proposal(toolCall("r", "read_file", map[string]any{"path": "a"}), map[string]any{"id": "w", "type": "state_write", "parameters": map[string]any{"key": "notes/a", "value": "$r.output"}}))
	if st := statuses(res); st["r"] != protocol.StatusSucceeded || st["w"] != protocol.StatusSucceeded {
		t.Fatalf("inside the set: %v", st)
	}
	// The state methods are held to the set as well.
	err := tb.Call(ctxT(t), protocol.MethodStateSet, map[string]any{"key": "config/x", "value": 1}, nil)
	if code, msg := rpcCode(t, err); code != protocol.CodeApprovalDenied || !strings.Contains(msg, "config/x") {
		t.Fatalf("state.set outside the set: %d %s", code, msg)
	}

	// The host role may widen.
	h, err := client.Dial(ctxT(t), ts.url, &client.Options{HostToken: "host-secret"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.Call(ctxT(t), protocol.MethodSessionCapabilitiesSet, map[string]any{"tools": []string{"read_file"}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.Call(ctxT(t), protocol.MethodSessionCapabilitiesSet, map[string]any{"tools": []string{"read_file", "shell"}}, &got); err != nil || len(got.Tools) != 2 {
		t.Fatalf("a host-role connection widening: %+v %v", got, err)
	}
}

func TestAReferenceCannotSmuggleAToolNameOrAKey(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newToolbox(t, ts, map[string]toolFunc{
		"read_file": func(context.Context, protocol.ToolExecuteParams) (any, error) {
			return map[string]any{"key": "config/admin", "tool": "shell"}, nil
		},
		"dispatch": echo,
		"shell":    echo,
	})
	mustCall(t, tb, protocol.MethodSessionCapabilitiesSet, map[string]any{"tools": []string{"read_file", "dispatch"}, "state_keys": []string{"notes/*"}}, nil)

	res := tb.submit(t, proposal(
		toolCall("r", "read_file", map[string]any{}),
		map[string]any{"id": "w", "type": "state_write", "parameters": map[string]any{"key": "$r.output.key", "value": true}}))
	if st := resultOf(t, res, "w"); st.Status != protocol.StatusRejected || !strings.Contains(st.ErrorText(), "state key 'config/admin' is outside") {
		t.Fatalf("a key carried by a reference: %+v %s", st, st.ErrorText())
	}
	if _, ok := ts.stateValue(t, "", "config/admin"); ok {
		t.Fatal("the smuggled key was written")
	}
	res = tb.submit(t, proposal(
		toolCall("r", "read_file", map[string]any{}),
		toolCall("d", "dispatch", map[string]any{"tool": "$r.output.tool"})))
	if st := resultOf(t, res, "d"); st.Status != protocol.StatusRejected || !strings.Contains(st.ErrorText(), "names 'shell'") {
		t.Fatalf("a tool name carried by a reference: %+v %s", st, st.ErrorText())
	}
	for _, c := range tb.callLog() {
		if c.Tool != "read_file" {
			t.Fatalf("%s was called", c.Tool)
		}
	}
}
