package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/allocs"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/protocol"
)

// doublingProposal is n chained state_writes, each value
// [$prev.output, $prev.output]: n actions would resolve to 2^n copies.
func doublingProposal(n int) map[string]any {
	acts := []map[string]any{stateWrite("d0", "d0", "x")}
	for i := 1; i < n; i++ {
		prev := fmt.Sprintf("$d%d.output", i-1)
		acts = append(acts, stateWrite(fmt.Sprintf("d%d", i), fmt.Sprintf("d%d", i), []any{prev, prev}))
	}
	return proposal(acts...)
}

func TestADoublingChainIsRejectedAtTheFirstActionPastTheBound(t *testing.T) {
	const limit = 256 << 10
	ts := startRuntime(t, engine.Options{MaxResolvedActionBytes: limit}, nil)
	tb := newToolbox(t, ts, map[string]toolFunc{})
	var res protocol.ProposalResult
	used := allocs.Bytes(func() { res = tb.submit(t, doublingProposal(40)) })

	first := -1
	var last []byte // the output of the last action that succeeded, encoded
	for i, r := range res.Results {
		if r.Status == protocol.StatusSucceeded {
			if first >= 0 {
				t.Fatalf("action %s succeeded after %s was rejected", r.ActionID, res.Results[first].ActionID)
			}
			last = mustJSON(r.Output)
			continue
		}
		if first < 0 {
			first = i
			if r.Status != protocol.StatusRejected || !strings.Contains(r.ErrorText(), "max_resolved_action_bytes") ||
				!strings.Contains(r.ErrorText(), fmt.Sprintf("action 'd%d' would pass more than %d bytes", i, limit)) {
				t.Fatalf("the first action not run: %s %s %q", r.ActionID, r.Status, r.ErrorText())
			}
		}
	}
	if first < 1 {
		t.Fatalf("no action was rejected for its size: %v", statuses(res))
	}
	// It holds two copies of the last output: past the bound, where the
	// last output was within it.
	if 2*len(last) <= limit-64 || len(last) > limit {
		t.Fatalf("d%d was rejected with the last output at %d bytes encoded; the bound is %d", first, len(last), limit)
	}

	// The baseline: the actions that ran, on their own. The rejected rest
	// must cost about nothing on top.
	var base protocol.ProposalResult
	baseline := allocs.Bytes(func() { base = tb.submit(t, doublingProposal(first)) })
	for _, r := range base.Results {
		if r.Status != protocol.StatusSucceeded {
			t.Fatalf("the baseline's %s: %s %q", r.ActionID, r.Status, r.ErrorText())
		}
	}
	t.Logf("40 doublings: %d bytes allocated (client and daemon); the %d actions that run, alone: %d", used, first, baseline)
	if used > 2*baseline {
		t.Fatalf("the proposal allocated %d bytes, %.1f times its %d actions that run (%d)", used, float64(used)/float64(baseline), first, baseline)
	}
}

// BenchmarkHostileDoubling40 is the 40-action doubling proposal over the
// wire, with the default bounds; BENCHMARKS.md reports it.
func BenchmarkHostileDoubling40(b *testing.B) {
	ts := startServerWith(b, serverSetup{})
	c, err := client.Dial(context.Background(), ts.url, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	params := map[string]any{"proposal": doublingProposal(40)}
	b.Logf("proposal: %d bytes", len(mustJSON(params)))
	for b.Loop() {
		var res json.RawMessage
		if err := c.Call(context.Background(), protocol.MethodProposalSubmit, params, &res); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(res)), "reply-bytes")
	}
}
