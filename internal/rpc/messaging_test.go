package rpc

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/messaging"
	"github.com/parslee-ai/car-server/internal/store/file"
	"github.com/parslee-ai/car-server/protocol"
)

// startMessagingServer serves a runtime with an approval ledger and a
// message ledger under dir (reopened as they are after a restart).
func startMessagingServer(t *testing.T, dir string) *testServer {
	t.Helper()
	led, _, err := file.OpenApprovals(filepath.Join(dir, "approvals.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	msgs, _, err := file.OpenMessages(filepath.Join(dir, "messages.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return startRuntime(t, engine.Options{Approvals: led, Messages: msgs}, func() error { return errors.Join(led.Close(), msgs.Close()) })
}

func sendAction(id string, params map[string]any) map[string]any {
	return map[string]any{"id": id, "type": "tool_call", "tool": "messaging.send", "parameters": params}
}

// approve records a human approval of the action, as an approver would:
// reaching a human is full_access.
func approve(t *testing.T, tb *toolbox, action map[string]any) {
	t.Helper()
	mustCall(t, tb, protocol.MethodPermissionApprove, map[string]any{"action": action, "reason": "ok to send"}, nil)
}

func TestMessagingSendDeliveredThroughTheClient(t *testing.T) {
	ts := startMessagingServer(t, t.TempDir())
	tb := newToolbox(t, ts, map[string]toolFunc{
		messaging.DeliveryTool: func(context.Context, protocol.ToolExecuteParams) (any, error) {
			return map[string]any{"message_id": "m-9"}, nil
		},
	})
	send := sendAction("s", map[string]any{"channel": "teams", "to": "user@example.invalid", "body": "Build is green.", "kind": "direct"})

	// Unapproved, it does not reach anyone: reaching a human is full_access.
	if r := tb.submit(t, proposal(send)); r.Results[0].Status != protocol.StatusRejected || !strings.Contains(r.Results[0].ErrorText(), "needs full_access") {
		t.Fatalf("unapproved send: %q", r.Results[0].ErrorText())
	}
	approve(t, tb, send)
	res := tb.submit(t, proposal(send))
	r := res.Results[0]
	if r.Status != protocol.StatusSucceeded {
		t.Fatalf("%s %q", r.Status, r.ErrorText())
	}
	if got := string(mustJSON(r.Output)); got != `{"channel":"teams","deduplicated":false,"delivered":true,"message_id":"m-9","queued":false}` {
		t.Fatalf("receipt %s", got)
	}
	calls := tb.callLog()
	if len(calls) != 1 || calls[0].Tool != messaging.DeliveryTool ||
		string(mustJSON(calls[0].Parameters)) != `{"body":"Build is green.","channel":"teams","kind":"direct","to":"user@example.invalid"}` {
		t.Fatalf("callback %+v", calls)
	}
	var list protocol.ToolsListResult
	mustCall(t, tb, protocol.MethodToolsList, nil, &list)
	advertised := false
	for _, tool := range list.Tools {
		advertised = advertised || (tool.Name == messaging.ToolName && strings.Contains(string(tool.Parameters), `"required":["channel","to","body"]`))
	}
	if !advertised {
		t.Fatalf("messaging.send is not advertised with its schema: %+v", list.Tools)
	}
	code, msg := rpcCode(t, tb.Call(ctxT(t), protocol.MethodToolsRegister, []any{map[string]any{"name": "messaging.send"}}, nil))
	if code != protocol.CodeInvalidParams || !strings.Contains(msg, "built in") {
		t.Fatalf("registering over the built-in: %d %q", code, msg)
	}
	code, _ = rpcCode(t, tb.Call(ctxT(t), protocol.MethodToolsUnregister, map[string]any{"name": "messaging.send"}, nil))
	if code != protocol.CodeInvalidParams {
		t.Fatal("the built-in was unregistered")
	}
}

func TestMessagingPolicyAndParseErrors(t *testing.T) {
	ts := startMessagingServer(t, t.TempDir())
	tb := newToolbox(t, ts, map[string]toolFunc{messaging.DeliveryTool: echo})
	mustCall(t, tb, protocol.MethodPolicyRegister, map[string]any{"name": "no_ceo", "rule": "deny_tool_param", "target": "messaging.send", "key": "to", "pattern": "ceo@"}, nil)
	send := sendAction("s", map[string]any{"channel": "mail", "to": "ceo@example.invalid", "body": "hello"})
	approve(t, tb, send)
	if r := tb.submit(t, proposal(send)); r.Results[0].Status != protocol.StatusRejected || !strings.Contains(r.Results[0].ErrorText(), "no_ceo") {
		t.Fatalf("policy on 'to': %q", r.Results[0].ErrorText())
	}
	bad := sendAction("b", map[string]any{"channel": "mail", "recipient": "x@example.invalid", "body": "hello"})
	approve(t, tb, bad)
	if r := tb.submit(t, proposal(bad)); r.Results[0].Status != protocol.StatusFailed || !strings.Contains(r.Results[0].ErrorText(), "missing required parameter 'to'") {
		t.Fatalf("alias: %s %q", r.Results[0].Status, r.Results[0].ErrorText())
	}
	if len(tb.callLog()) != 0 {
		t.Fatal("a denied or malformed send reached the client")
	}
}

func TestMessagingDedupAcrossARestart(t *testing.T) {
	dir := t.TempDir()
	send := sendAction("s", map[string]any{"channel": "slack", "kind": "channel", "to": "C1", "body": "deploy done", "idempotency_key": "deploy-77"})
	delivered := 0
	deliver := func(context.Context, protocol.ToolExecuteParams) (any, error) {
		delivered++
		return map[string]any{"message_id": "ts-1"}, nil
	}
	{
		ts := startMessagingServer(t, dir)
		tb := newToolbox(t, ts, map[string]toolFunc{messaging.DeliveryTool: deliver})
		approve(t, tb, send)
		tb.submit(t, proposal(send))
		r := tb.submit(t, proposal(send)).Results[0]
		out := r.Output.(map[string]any)
		if delivered != 1 || out["deduplicated"] != true || out["message_id"] != "ts-1" {
			t.Fatalf("repeat: delivered %d, receipt %v", delivered, out)
		}
		if err := ts.stop(); err != nil {
			t.Fatal(err)
		}
	}
	ts := startMessagingServer(t, dir) // the ledgers are reopened from disk
	tb := newToolbox(t, ts, map[string]toolFunc{messaging.DeliveryTool: deliver})
	r := tb.submit(t, proposal(send)).Results[0]
	if delivered != 1 || r.Status != protocol.StatusSucceeded || r.Output.(map[string]any)["deduplicated"] != true {
		t.Fatalf("after a restart: delivered %d, %s %v", delivered, r.Status, r.Output)
	}
}

func TestMessagingUndeliverableAndRetryable(t *testing.T) {
	ts := startMessagingServer(t, t.TempDir())
	silent := newToolbox(t, ts, map[string]toolFunc{}) // handles no messaging.channel_send
	send := sendAction("s", map[string]any{"channel": "teams", "to": "u", "body": "b", "idempotency_key": "k1"})
	approve(t, silent, send)
	if r := silent.submit(t, proposal(send)).Results[0]; r.Status != protocol.StatusFailed || !strings.Contains(r.ErrorText(), "this client does not deliver messages") {
		t.Fatalf("no delivery: %q", r.ErrorText())
	}

	attempts := 0
	flaky := newToolbox(t, ts, map[string]toolFunc{messaging.DeliveryTool: func(context.Context, protocol.ToolExecuteParams) (any, error) {
		attempts++
		if attempts == 1 {
			return nil, errors.New("rate limited by teams; retry in a minute")
		}
		return nil, nil
	}})
	if r := flaky.submit(t, proposal(send)).Results[0]; r.Status != protocol.StatusFailed || r.ErrorText() != "rate limited by teams; retry in a minute" {
		t.Fatalf("failed send: %q", r.ErrorText())
	}
	r := flaky.submit(t, proposal(send)).Results[0]
	out, _ := r.Output.(map[string]any)
	if attempts != 2 || r.Status != protocol.StatusSucceeded || out["deduplicated"] != false || out["delivered"] != true {
		t.Fatalf("a failed send must stay retryable: attempts %d, %s %v", attempts, r.Status, r.Output)
	}
	if _, hasID := out["message_id"]; hasID {
		t.Fatal("a reply without message_id produced one")
	}
}
