package rpc

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

// An idempotent call carries its fencing token in tools.execute's fence
// ({key, epoch}); a call that is not idempotent carries none. Two identical
// calls in flight on the file store each run under an epoch of their own;
// the later one's result is stored, and the earlier one, finishing last,
// is refused as superseded, with an event that says so.
func TestAFencedCallWhoseClaimWasSupersededIsRefused(t *testing.T) {
	ts := startIdemServer(t, filepath.Join(t.TempDir(), "idempotency.jsonl"))
	fences := make(chan *protocol.Fence, 2)
	release := make(chan struct{})
	slow := func(ctx context.Context, call protocol.ToolExecuteParams) (any, error) {
		fences <- call.Fence
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return map[string]any{"by": "first"}, nil
	}
	fast := func(_ context.Context, call protocol.ToolExecuteParams) (any, error) {
		fences <- call.Fence
		return map[string]any{"by": "second"}, nil
	}
	first := newToolbox(t, ts, map[string]toolFunc{"book_seat": slow})
	second := newToolbox(t, ts, map[string]toolFunc{"book_seat": fast})
	charge := func() any {
		return proposal(toolCall("c", "book_seat", map[string]any{"amount": 5}, "idempotent", true))
	}

	done := make(chan protocol.ProposalResult, 1)
	go func() {
		var res protocol.ProposalResult
		_ = first.Call(ctxT(t), protocol.MethodProposalSubmit, map[string]any{"proposal": charge()}, &res)
		done <- res
	}()
	var older *protocol.Fence
	select {
	case older = <-fences:
	case r := <-done:
		t.Fatalf("the first call ended before it reached its tool: %+v", r)
	}
	r2 := second.submit(t, charge())
	newer := <-fences
	close(release)
	r1 := <-done

	if older == nil || newer == nil || older.Key == "" || older.Key != newer.Key || older.Epoch != 1 || newer.Epoch != 2 {
		t.Fatalf("fences %+v and %+v; want one key at epochs 1 then 2", older, newer)
	}
	if s := r2.Results[0]; s.Status != protocol.StatusSucceeded {
		t.Fatalf("the newer call: %s %s", s.Status, s.ErrorText())
	}
	if s := r1.Results[0]; s.Status != protocol.StatusFailed || !strings.HasPrefix(s.ErrorText(), "superseded: ") || !strings.Contains(s.ErrorText(), "epoch 1") {
		t.Fatalf("the superseded call: %s %q; want failed, saying superseded at epoch 1", s.Status, s.ErrorText())
	}
	ev := eventOf(t, first.Client, map[string]any{"kinds": []string{"action_superseded"}})
	if ev.ActionID != "c" || ev.Data["tool"] != "book_seat" || ev.Data["epoch"] == nil {
		t.Fatalf("the action_superseded event %+v", ev)
	}
	again := second.submit(t, charge())
	if s := again.Results[0]; s.CacheHit != "idempotency" || !equalJSON(s.Output, map[string]any{"by": "second"}) {
		t.Fatalf("a resubmission got %+v; want the newer call's stored result", s)
	}

	// A call that is not idempotent has no fence.
	second.submit(t, proposal(toolCall("c", "book_seat", map[string]any{"amount": 6})))
	if f := <-fences; f != nil {
		t.Fatalf("a call that is not idempotent carried fence %+v", f)
	}
}
