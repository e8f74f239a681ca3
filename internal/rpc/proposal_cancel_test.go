package rpc

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/protocol"
)

// cancelProposal calls proposal.cancel on tb and returns whether it
// cancelled.
func cancelProposal(t *testing.T, tb *toolbox, id, reason string) bool {
	t.Helper()
	var res protocol.ProposalCancelResult
	mustCall(t, tb, protocol.MethodProposalCancel, protocol.ProposalCancelParams{ProposalID: id, Reason: reason}, &res)
	return res.Cancelled
}

func TestProposalCancelMidRun(t *testing.T) {
	ts := startServer(t, Options{})
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	runner := newToolbox(t, ts, map[string]toolFunc{"hang": func(ctx context.Context, _ protocol.ToolExecuteParams) (any, error) {
		started <- struct{}{}
		select {
		case <-ctx.Done():
		case <-release:
		}
		return nil, ctx.Err()
	}})
	t.Cleanup(func() { close(release) }) // before the client closes
	other := newToolbox(t, ts, map[string]toolFunc{})
	ch := submitAsync(t, runner.Client, map[string]any{"id": "p-cancel", "actions": []any{
		map[string]any{"id": "w", "type": "state_write", "parameters": map[string]any{"key": "cancel-k", "value": 1}},
		toolCall("t", "hang", nil, "dependencies", []string{"w"}),
		toolCall("after", "hang", nil, "dependencies", []string{"t"}),
	}})
	select {
	case <-started:
	case <-time.After(testTimeout):
		t.Fatal("the callback never arrived")
	}

	if cancelProposal(t, other, "p-cancel", "not yours") {
		t.Fatal("a connection that did not submit the proposal cancelled it")
	}
	if cancelProposal(t, runner, "no-such-proposal", "") {
		t.Fatal("an unknown id was cancelled")
	}
	if !cancelProposal(t, runner, "p-cancel", "operator stop") {
		t.Fatal("the submitter could not cancel its proposal")
	}
	const want = "cancelled: operator stop"
	select {
	case c := <-runner.cancel:
		if c.Reason != want {
			t.Fatalf("tools.cancel reason %q, want %q", c.Reason, want)
		}
	case <-time.After(testTimeout):
		t.Fatal("the running callback got no tools.cancel")
	}
	res := awaitResult(t, ch, 3)
	if r := resultOf(t, res, "t"); r.Status != protocol.StatusFailed || !strings.Contains(r.ErrorText(), want) {
		t.Fatalf("running action: %s %q, want failed with %q", r.Status, r.ErrorText(), want)
	}
	if r := resultOf(t, res, "after"); r.Status != protocol.StatusSkipped || !strings.Contains(r.ErrorText(), want) {
		t.Fatalf("action not started: %s %q, want skipped with %q", r.Status, r.ErrorText(), want)
	}
	var exists bool
	mustCall(t, other, protocol.MethodStateExists, map[string]any{"key": "cancel-k"}, &exists)
	if exists {
		t.Fatal("the cancelled proposal's state write was not rolled back")
	}
	if len(runner.callLog()) != 1 {
		t.Fatalf("callbacks made: %+v, want only the one cancelled", runner.callLog())
	}
	ev := eventOf(t, other.Client, map[string]any{"kinds": []string{string(engine.EventProposalCancelled)}, "proposal_id": "p-cancel"})
	if ev.Data["reason"] != "operator stop" || ev.Data["by"] != ev.Connection {
		t.Fatalf("proposal_cancelled event %+v", ev)
	}
	if cancelProposal(t, runner, "p-cancel", "") {
		t.Fatal("a finished proposal was cancelled")
	}
}
