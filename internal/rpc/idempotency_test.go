package rpc

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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

// flushSpy is the file store's idempotency cache under journal_sync =
// proposal, seen from the engine: it counts the Flush calls, notes how many
// results were stored at each, and can fail them.
type flushSpy struct {
	*file.Idempotency
	mu      sync.Mutex
	flushed []int // results stored at each Flush
	fail    error
}

func (s *flushSpy) Flush(ctx context.Context, proposalID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushed = append(s.flushed, s.Len())
	if s.fail != nil {
		return s.fail
	}
	return s.Idempotency.Flush(ctx, proposalID)
}

func (s *flushSpy) calls() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.flushed...)
}

// A store that defers its flush is flushed once per proposal, after the
// proposal's results are stored and before its reply; a proposal with no
// idempotent call does not flush; a failed flush turns the actions it
// covered into failures.
func TestAProposalsResultsAreFlushedBeforeItsReply(t *testing.T) {
	cache, _, err := file.OpenIdempotency(filepath.Join(t.TempDir(), "idempotency.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	spy := &flushSpy{Idempotency: cache}
	ts := startRuntime(t, engine.Options{Idempotency: spy, RetryBase: 1}, cache.Close)
	var n atomic.Int32
	tb := newToolbox(t, ts, map[string]toolFunc{"book_seat": func(context.Context, protocol.ToolExecuteParams) (any, error) { n.Add(1); return "charged", nil }})

	res := tb.submit(t, proposal(
		toolCall("a", "book_seat", map[string]any{"seat": 1}, "idempotent", true),
		toolCall("b", "book_seat", map[string]any{"seat": 2}, "idempotent", true, "dependencies", []string{"a"}),
		toolCall("c", "book_seat", map[string]any{"seat": 3}, "idempotent", true),
	))
	if s := statuses(res); s["a"] != protocol.StatusSucceeded || s["b"] != protocol.StatusSucceeded || s["c"] != protocol.StatusSucceeded {
		t.Fatalf("%v", s)
	}
	if got := spy.calls(); len(got) != 1 || got[0] != 3 {
		t.Fatalf("flushes with the results stored at each: %v; want one, after all 3 results", got)
	}
	tb.submit(t, proposal(toolCall("p", "book_seat", map[string]any{"seat": 9})))
	if got := spy.calls(); len(got) != 1 {
		t.Fatalf("a proposal without an idempotent call flushed: %v", got)
	}
	// A hit is flushed too: it may be another proposal's unflushed result.
	tb.submit(t, proposal(toolCall("a", "book_seat", map[string]any{"seat": 1}, "idempotent", true)))
	if got := spy.calls(); len(got) != 2 || n.Load() != 4 {
		t.Fatalf("after a hit: flushes %v, calls %d; want 2 flushes, 4 calls", got, n.Load())
	}

	spy.mu.Lock()
	spy.fail = errors.New("disk on fire")
	spy.mu.Unlock()
	res = tb.submit(t, proposal(
		toolCall("x", "book_seat", map[string]any{"seat": 10}, "idempotent", true),
		toolCall("y", "book_seat", map[string]any{"seat": 11}),
	))
	x, y := res.Results[0], res.Results[1]
	if x.Status != protocol.StatusFailed || x.Output != nil || x.Error == nil || !strings.Contains(*x.Error, "could not be flushed") || !strings.Contains(*x.Error, "disk on fire") {
		t.Fatalf("the action whose flush failed: %+v; want it failed, saying why", x)
	}
	if y.Status != protocol.StatusSucceeded {
		t.Fatalf("the plain action beside it: %+v; a failed flush is not its concern", y)
	}
}
