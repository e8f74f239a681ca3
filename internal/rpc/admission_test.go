package rpc

import (
	"context"
	"testing"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/protocol"
)

// TestAStalledProposalDoesNotHoldOthersUp: with room for one starting
// proposal, a proposal whose tool never answers (a slow tool, or one that
// waits for a proposal of its own) still lets the next one start once its
// lease is out.
func TestAStalledProposalDoesNotHoldOthersUp(t *testing.T) {
	ts := startRuntime(t, engine.Options{MaxStarting: 1}, nil)
	stalled, release := make(chan struct{}), make(chan struct{})
	slow := newToolbox(t, ts, map[string]toolFunc{"wait": func(ctx context.Context, _ protocol.ToolExecuteParams) (any, error) {
		close(stalled)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return "late", nil
	}})
	first := submitAsync(t, slow.Client, proposal(toolCall("w", "wait", nil)))
	<-stalled

	// The stalled one calls a tool that submits a proposal of its own and
	// waits for it: this second proposal must start all the same.
	quick := newToolbox(t, ts, map[string]toolFunc{"echo": echo})
	got := <-submitAsync(t, quick.Client, proposal(toolCall("e", "echo", map[string]any{"v": 1})))
	if got.err != nil || statuses(got.res)["e"] != protocol.StatusSucceeded {
		t.Fatalf("the second proposal: %v %+v", got.err, got.res)
	}
	close(release)
	if got := <-first; got.err != nil || statuses(got.res)["w"] != protocol.StatusSucceeded {
		t.Fatalf("the stalled proposal: %v %+v", got.err, got.res)
	}
}
