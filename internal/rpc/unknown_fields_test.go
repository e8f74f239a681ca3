package rpc

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

// A misspelt action field is reported, not silently ignored: the proposal
// runs as upstream runs it (the field ignored) and its result says which
// field, with the name it probably meant; verify lists it; strict field
// checking, per proposal or daemon-wide, refuses the proposal instead, with
// nothing run.
func TestUnknownActionFieldsAreReported(t *testing.T) {
	ts := startServer(t, Options{})
	var ran atomic.Int32
	tb := newToolbox(t, ts, map[string]toolFunc{
		"step": func(context.Context, protocol.ToolExecuteParams) (any, error) {
			ran.Add(1)
			return "ok", nil
		},
	})
	actions := []map[string]any{
		{"id": "a1", "type": "tool_call", "tool": "step"},
		{"id": "a2", "type": "tool_call", "tool": "step", "depends_on": []string{"a1"}, "paramaters": map[string]any{}},
	}
	var res protocol.ProposalResult
	call(t, tb.Client, protocol.MethodProposalSubmit, map[string]any{"proposal": map[string]any{"actions": actions, "priority": 1}}, &res)
	want := []string{
		`proposal: unknown field "priority"`,
		`action 'a2': unknown field "depends_on" (did you mean "dependencies"?)`,
		`action 'a2': unknown field "paramaters" (did you mean "parameters"?)`,
	}
	if len(res.Warnings) != len(want) {
		t.Fatalf("warnings %q, want %d", res.Warnings, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(res.Warnings[i], w) {
			t.Errorf("warning %d is %q, want it to begin %q", i, res.Warnings[i], w)
		}
	}
	if ran.Load() != 2 || res.Results[1].Status != protocol.StatusSucceeded {
		t.Fatalf("the proposal did not run as it would without the fields: %d calls, %+v", ran.Load(), res.Results)
	}

	var v protocol.VerifyResult
	call(t, tb.Client, protocol.MethodVerify, map[string]any{"proposal": map[string]any{"actions": actions}}, &v)
	found := 0
	for _, is := range v.Issues {
		if is.Severity == "warning" && strings.Contains(is.Message, "unknown field") {
			found++
		}
	}
	if found != 2 {
		t.Fatalf("verify lists %d unknown-field warnings, want 2: %+v", found, v.Issues)
	}

	ran.Store(0)
	err := tb.Call(ctxT(t), protocol.MethodProposalSubmit, map[string]any{"proposal": map[string]any{"actions": actions, "strict": true}}, nil)
	code, msg := rpcCode(t, err)
	if code != protocol.CodeInvalidParams || !strings.Contains(msg, `"depends_on" (did you mean "dependencies"?)`) || !strings.Contains(msg, "strict") {
		t.Fatalf("strict: %d %q", code, msg)
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("a strict proposal with unknown fields made %d calls", n)
	}
}

func TestStrictFieldsRefusesDaemonWide(t *testing.T) {
	ts := startServer(t, Options{StrictFields: true})
	tb := newToolbox(t, ts, map[string]toolFunc{"step": func(context.Context, protocol.ToolExecuteParams) (any, error) { return "ok", nil }})
	err := tb.Call(ctxT(t), protocol.MethodProposalSubmit, map[string]any{"proposal": map[string]any{"actions": []map[string]any{
		{"id": "a1", "type": "tool_call", "tool": "step", "timeout": 5},
	}}}, nil)
	code, msg := rpcCode(t, err)
	if code != protocol.CodeInvalidParams || !strings.Contains(msg, `"timeout" (did you mean "timeout_ms"?)`) || !strings.Contains(msg, "strict_fields") {
		t.Fatalf("strict_fields: %d %q", code, msg)
	}
	// A proposal whose fields are all known runs, with no warnings.
	var res protocol.ProposalResult
	call(t, tb.Client, protocol.MethodProposalSubmit, map[string]any{"proposal": map[string]any{"actions": []map[string]any{
		{"id": "a1", "type": "tool_call", "tool": "step", "timeout_ms": 5000},
	}}}, &res)
	if res.Results[0].Status != protocol.StatusSucceeded || res.Warnings != nil {
		t.Fatalf("%+v", res)
	}
}
