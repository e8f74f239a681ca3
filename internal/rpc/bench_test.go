package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/protocol"
)

// BenchmarkActionOverhead measures, in one run and over one real loopback
// WebSocket, (a) a raw JSON-RPC round trip (state.exists) and (b) a proposal
// of 1,000 independent tool calls answered by the client. It reports the
// time per action as a ratio to one raw round trip, and allocations per
// action (client and daemon together: both live in this process).
func BenchmarkActionOverhead(b *testing.B) {
	for _, conc := range []int{1, 16} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) { benchOverhead(b, conc, 1000, false) })
	}
}

// BenchmarkChainOverhead is BenchmarkActionOverhead for a chain of 300 tool
// calls, each listing the one before in its dependencies: one action at a
// time whatever the concurrency, so every per-step delay of the scheduler
// and the wire adds up.
func BenchmarkChainOverhead(b *testing.B) {
	benchOverhead(b, 16, 300, true)
}

func benchOverhead(b *testing.B, concurrency, actions int, chain bool) {
	ts := startServerWith(b, serverSetup{engine: engine.Options{MaxConcurrency: concurrency}})
	c, err := client.Dial(context.Background(), ts.url, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	c.HandleRequest(protocol.MethodToolsExecute, func(_ context.Context, _ json.RawMessage) (any, error) {
		return map[string]any{"ok": true}, nil
	})
	ctx := context.Background()
	if err := c.Call(ctx, protocol.MethodToolsRegister, []protocol.ToolSchema{{Name: "noop"}}, nil); err != nil {
		b.Fatal(err)
	}
	params := noopProposal(actions, chain)
	probe := map[string]any{"key": "k"}

	var raw, prop time.Duration
	var allocs uint64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		for j := 0; j < actions; j++ {
			if err := c.Call(ctx, protocol.MethodStateExists, probe, nil); err != nil {
				b.Fatal(err)
			}
		}
		raw += time.Since(start)

		res, took, n := submitMeasured(b, c, params)
		prop += took
		allocs += n
		if res.Cost.ToolCalls != actions || res.Cost.ActionsExecuted != actions {
			b.Fatalf("tool_calls %d", res.Cost.ToolCalls)
		}
	}
	b.StopTimer()
	n := float64(b.N * actions)
	b.ReportMetric(float64(raw.Nanoseconds())/n, "ns/roundtrip")
	b.ReportMetric(float64(prop.Nanoseconds())/n, "ns/action")
	b.ReportMetric(float64(prop)/float64(raw), "action/roundtrip")
	b.ReportMetric(float64(allocs)/n, "allocs/action")
}

// submitMeasured submits a proposal and says how long it took and how many
// allocations the process made meanwhile, daemon and client together.
func submitMeasured(b *testing.B, c *client.Client, params any) (res protocol.ProposalResult, took time.Duration, allocs uint64) {
	b.Helper()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.Mallocs
	start := time.Now()
	if err := c.Call(context.Background(), protocol.MethodProposalSubmit, params, &res); err != nil {
		b.Fatal(err)
	}
	took = time.Since(start)
	runtime.ReadMemStats(&ms)
	return res, took, ms.Mallocs - before
}

// noopProposal is proposal.submit's params for actions calls of noop, each
// depending on the one before when chain.
func noopProposal(actions int, chain bool) map[string]any {
	list := make([]any, actions)
	for i := range list {
		a := map[string]any{"id": fmt.Sprintf("a%d", i), "type": "tool_call", "tool": "noop", "parameters": map[string]any{"i": i}}
		if chain && i > 0 {
			a["dependencies"] = []string{fmt.Sprintf("a%d", i-1)}
		}
		list[i] = a
	}
	return map[string]any{"proposal": map[string]any{"actions": list}}
}
