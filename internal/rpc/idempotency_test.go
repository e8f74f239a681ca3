package rpc

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/store/file"
	"github.com/parslee-ai/car-server/protocol"
)

// startIdemServer serves a runtime whose idempotency journal is at path.
func startIdemServer(t *testing.T, path string) *testServer {
	t.Helper()
	cache, _, err := file.OpenIdempotency(path)
	if err != nil {
		t.Fatal(err)
	}
	return startRuntime(t, engine.Options{Idempotency: cache, RetryBase: 1}, cache.Close)
}

func TestIdempotentResultsAreServedFromTheJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idempotency.jsonl")
	ts := startIdemServer(t, path)
	n := 0
	charge := func(_ context.Context, call protocol.ToolExecuteParams) (any, error) {
		n++
		return map[string]any{"charge_id": n, "amount": call.Parameters["amount"]}, nil
	}
	tb := newToolbox(t, ts, map[string]toolFunc{"book_seat": charge})
	tb.register(t, charge, map[string]any{"name": "reserve", "idempotent": true})

	first := tb.submit(t, proposal(toolCall("c", "book_seat", map[string]any{"amount": 5}, "idempotent", true)))
	again := tb.submit(t, proposal(toolCall("c", "book_seat", map[string]any{"amount": 5}, "idempotent", true)))
	if n != 1 {
		t.Fatalf("the card was charged %d times", n)
	}
	a, b := first.Results[0], again.Results[0]
	if a.CacheHit != "" || b.CacheHit != "idempotency" || b.Status != protocol.StatusSucceeded || again.Cost.ToolCalls != 0 {
		t.Fatalf("first %+v, again %+v (cost %+v)", a, b, again.Cost)
	}
	if !equalJSON(a.Output, b.Output) {
		t.Fatalf("stored output %v, first output %v", b.Output, a.Output)
	}
	ev := eventOf(t, tb.Client, map[string]any{"kinds": []string{"action_succeeded"}, "data_matches": map[string]string{"cache_hit": "idempotency"}})
	if ev.ActionID != "c" {
		t.Fatalf("event %+v", ev)
	}

	// Different parameters, a different tenant, or no idempotency: the tool runs.
	tb.submit(t, proposal(toolCall("c", "book_seat", map[string]any{"amount": 6}, "idempotent", true)))
	var res protocol.ProposalResult
	mustCall(t, tb, protocol.MethodProposalSubmit, map[string]any{
		"proposal": proposal(toolCall("c", "book_seat", map[string]any{"amount": 5}, "idempotent", true)),
		"scope":    map[string]any{"tenantId": "other"},
	}, &res)
	tb.submit(t, proposal(toolCall("c", "book_seat", map[string]any{"amount": 5})))
	if n != 4 {
		t.Fatalf("calls %d, want 4", n)
	}

	// An explicit key replaces the parameters; the tool schema's flag counts.
	tb.submit(t, proposal(toolCall("r", "reserve", map[string]any{"nonce": 1}, "metadata", map[string]any{"idempotency_key": "order-7"})))
	r := tb.submit(t, proposal(toolCall("r", "reserve", map[string]any{"nonce": 2}, "metadata", map[string]any{"idempotency_key": "order-7"})))
	if n != 5 || r.Results[0].CacheHit != "idempotency" {
		t.Fatalf("explicit key: calls %d, %+v", n, r.Results[0])
	}
}

func TestAbortTombstonesThisProposalsResults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idempotency.jsonl")
	ts := startIdemServer(t, path)
	n := 0
	tb := newToolbox(t, ts, map[string]toolFunc{
		"book_seat": func(context.Context, protocol.ToolExecuteParams) (any, error) { n++; return "charged", nil },
		"pack_box":  func(context.Context, protocol.ToolExecuteParams) (any, error) { return nil, errors.New("no stock") },
	})
	plan := proposal(
		toolCall("pay", "book_seat", map[string]any{"order": 1}, "idempotent", true),
		toolCall("send", "pack_box", nil, "dependencies", []string{"pay"}),
	)
	res := tb.submit(t, plan)
	if s := statuses(res); s["pay"] != protocol.StatusSucceeded || s["send"] != protocol.StatusFailed {
		t.Fatalf("%v", s)
	}
	eventOf(t, tb.Client, map[string]any{"kinds": []string{"idempotency_invalidated"}})
	// The rolled-back proposal's result is no longer served: re-submitting runs it.
	tb.submit(t, plan)
	if n != 2 {
		t.Fatalf("after rollback the charge ran %d times in total, want 2", n)
	}
}

func equalJSON(a, b any) bool {
	return string(mustJSON(a)) == string(mustJSON(b))
}
