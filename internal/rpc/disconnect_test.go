package rpc

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/protocol"
)

// eventOf returns the newest event matching q, failing when there is none.
// Callers ask only once the daemon has signalled that the work is done
// (a reply, or the "connection closed" log line of a vanished client).
func eventOf(t *testing.T, c *client.Client, q map[string]any) engine.Event {
	t.Helper()
	var res struct {
		Events []engine.Event `json:"events"`
	}
	if err := c.Call(ctxT(t), protocol.MethodEventsQuery, q, &res); err != nil {
		t.Fatalf("events.query %v: %v", q, err)
	}
	if len(res.Events) == 0 {
		t.Fatalf("no event matching %v", q)
	}
	return res.Events[0]
}

// submitAsync submits on its own goroutine under the test's deadline; the
// reply, or the error that replaced it, arrives on the channel.
func submitAsync(t *testing.T, c *client.Client, p any) <-chan submitted {
	ch := make(chan submitted, 1)
	ctx := ctxT(t)
	go func() {
		var s submitted
		s.err = c.Call(ctx, protocol.MethodProposalSubmit, map[string]any{"proposal": p}, &s.res)
		ch <- s
	}()
	return ch
}

// submitted is what submitAsync delivers.
type submitted struct {
	res protocol.ProposalResult
	err error
}

// awaitResult waits for an asynchronous submission and fails the test when
// it failed, did not come within testTimeout, or has not n results.
func awaitResult(t *testing.T, ch <-chan submitted, n int) protocol.ProposalResult {
	t.Helper()
	select {
	case s := <-ch:
		if s.err != nil {
			t.Fatalf("proposal.submit: %v", s.err)
		}
		if len(s.res.Results) != n {
			t.Fatalf("want %d results, got %+v", n, s.res)
		}
		return s.res
	case <-time.After(testTimeout):
		t.Fatal("no reply to proposal.submit")
		return protocol.ProposalResult{}
	}
}

func TestClientDisconnectMidCallback(t *testing.T) {
	ts := startServer(t, Options{})
	called := make(chan struct{})
	// The submitter answers nothing: it vanishes while the callback is open.
	sub := newToolbox(t, ts, map[string]toolFunc{"hang": func(ctx context.Context, _ protocol.ToolExecuteParams) (any, error) {
		close(called)
		<-ctx.Done()
		return nil, ctx.Err()
	}})
	reply := submitAsync(t, sub.Client, proposal(
		toolCall("h", "hang", nil),
		toolCall("next", "hang", nil, "dependencies", []string{"h"}),
	))
	select {
	case <-called:
	case <-time.After(testTimeout):
		t.Fatal("callback never arrived")
	}
	sub.Close()
	select {
	case s := <-reply:
		if s.err == nil {
			t.Fatalf("a client that closed got a reply: %+v", s.res)
		}
	case <-time.After(testTimeout):
		t.Fatal("closing the client did not end its call")
	}

	// The daemon finishes the proposal at once (no 300 s wait) and stays
	// healthy: the connection logs its close only after its handlers return.
	ts.waitLog(t, "connection closed", 1)
	observer := ts.dial(t, "")
	ev := eventOf(t, observer, map[string]any{"kinds": []string{"action_failed"}, "action_id": "h"})
	if msg, _ := ev.Data["error"].(string); !strings.Contains(msg, "disconnected") {
		t.Fatalf("failure should say the client disconnected: %q", msg)
	}
	eventOf(t, observer, map[string]any{"kinds": []string{"proposal_finished"}, "proposal_id": "p-test"})
	skipped := eventOf(t, observer, map[string]any{"kinds": []string{"action_skipped"}, "action_id": "next"})
	if skipped.ProposalID != "p-test" {
		t.Fatalf("skipped event %+v", skipped)
	}
	var keys []string
	if err := observer.Call(ctxT(t), "state.keys", nil, &keys); err != nil {
		t.Fatalf("daemon unhealthy after a client vanished: %v", err)
	}
}

func TestEventsAndChainVerification(t *testing.T) {
	ts := startServer(t, Options{HostToken: "the-host-token"})
	tb := newToolbox(t, ts, map[string]toolFunc{"echo": echo})
	ctx := ctxT(t)
	tb.submit(t, proposal(toolCall("before", "echo", nil)))
	var ok map[string]bool
	if err := tb.Call(ctx, protocol.MethodEventsChainEnable, nil, &ok); err != nil || !ok["ok"] {
		t.Fatalf("chain enable: %v %v", ok, err)
	}
	var count int
	if err := tb.Call(ctx, protocol.MethodEventsCount, nil, &count); err != nil {
		t.Fatal(err)
	}
	res := tb.submit(t, map[string]any{"id": "p-chained", "actions": []any{toolCall("a", "echo", nil)}})
	if res.Results[0].Status != protocol.StatusSucceeded {
		t.Fatal(res.Results[0])
	}
	var after int
	if err := tb.Call(ctx, protocol.MethodEventsCount, nil, &after); err != nil {
		t.Fatal(err)
	}
	var verify map[string]int
	if err := tb.Call(ctx, protocol.MethodEventsChainVerify, nil, &verify); err != nil {
		t.Fatal(err)
	}
	if _, tampered := verify["tampered_at"]; tampered || verify["verified"] != after {
		t.Fatalf("verify %v; the chain is always on, and %d events were appended", verify, after)
	}

	var q struct {
		Count  int            `json:"count"`
		Events []engine.Event `json:"events"`
	}
	if err := tb.Call(ctx, protocol.MethodEventsQuery, map[string]any{"proposal_id": "p-chained"}, &q); err != nil {
		t.Fatal(err)
	}
	kinds := make([]string, len(q.Events))
	for i, e := range q.Events {
		kinds[i] = string(e.Kind)
		if e.Hash == "" || e.Connection == "" {
			t.Fatalf("event without hash or connection: %+v", e)
		}
	}
	want := "proposal_finished,action_succeeded,action_started,permission_decision,proposal_received" // newest first
	if strings.Join(kinds, ",") != want {
		t.Fatalf("events %s", strings.Join(kinds, ","))
	}
	if err := tb.Call(ctx, protocol.MethodEventsQuery, map[string]any{"data_matches": map[string]string{"tool": "echo"}, "limit": 1}, &q); err != nil || q.Count != 1 {
		t.Fatalf("limit/data_matches: %+v %v", q, err)
	}

	var summary engine.MetricsSummary
	if err := tb.Call(ctx, protocol.MethodMetricsSummary, nil, &summary); err != nil {
		t.Fatal(err)
	}
	if summary.ActionsSucceeded != 2 || summary.ProposalsReceived != 2 || summary.SuccessRate != 1 {
		t.Fatalf("summary %+v", summary)
	}

	var ret struct {
		Policy  engine.RetentionPolicy `json:"policy"`
		Removed int                    `json:"removed"`
	}
	// events.retention is the operator's: the host role only.
	if code, _ := rpcCode(t, tb.Call(ctx, protocol.MethodEventsRetention, map[string]any{"policy": map[string]any{"max_events": 3}}, &ret)); code != protocol.CodeApprovalDenied {
		t.Fatalf("events.retention from a plain client: code %d, want it refused", code)
	}
	host, err := client.Dial(ctx, ts.url, &client.Options{HostToken: "the-host-token"})
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	if err := host.Call(ctx, protocol.MethodEventsRetention, map[string]any{"policy": map[string]any{"max_events": 3}}, &ret); err != nil {
		t.Fatal(err)
	}
	if ret.Removed != after-3 || *ret.Policy.MaxEvents != 3 {
		t.Fatalf("retention %+v (had %d)", ret, after)
	}
	if err := tb.Call(ctx, protocol.MethodEventsCount, nil, &count); err != nil || count != 3 {
		t.Fatalf("count after retention %d: %v", count, err)
	}
	code, msg := rpcCode(t, host.Call(ctx, protocol.MethodEventsRetention, map[string]any{"policy": map[string]any{"max_age_secs": uint64(1) << 60}}, nil))
	if code != protocol.CodeInvalidParams || !strings.Contains(msg, "max_age_secs must be at most") {
		t.Fatalf("an overflowing max_age_secs: %d %q", code, msg)
	}
	if err := tb.Call(ctx, protocol.MethodEventsCount, nil, &count); err != nil || count < 3 {
		t.Fatalf("a refused retention policy removed events: %d %v", count, err)
	}
}

func TestShutdownCancelsCallbacksBeforeClosing(t *testing.T) {
	ts := startServer(t, Options{})
	called := make(chan struct{})
	tb := newToolbox(t, ts, map[string]toolFunc{"hang": func(ctx context.Context, _ protocol.ToolExecuteParams) (any, error) {
		close(called)
		<-ctx.Done()
		return nil, ctx.Err()
	}})
	reply := submitAsync(t, tb.Client, proposal(toolCall("h", "hang", nil)))
	select {
	case <-called:
	case <-time.After(testTimeout):
		t.Fatal("callback never arrived")
	}
	graceOver, cancel := context.WithCancel(context.Background())
	cancel() // no grace at all: in-flight work is cancelled at once
	if err := ts.srv.Shutdown(graceOver); !errors.Is(err, context.Canceled) {
		t.Fatalf("shutdown with no grace should report the cut, got %v", err)
	}
	select {
	case c := <-tb.cancel:
		if !strings.Contains(c.Reason, "shutting down") {
			t.Fatalf("cancel reason %q", c.Reason)
		}
	case <-time.After(testTimeout):
		t.Fatal("no tools.cancel before the connection closed")
	}
	if res := awaitResult(t, reply, 1); res.Results[0].Status != protocol.StatusFailed {
		t.Fatalf("the proposal should finish with the action failed: %+v", res)
	}
}
