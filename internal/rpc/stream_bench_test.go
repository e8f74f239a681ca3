package rpc

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/protocol"
)

// BenchmarkStreamChunks measures, in one run and over real loopback
// WebSockets, chunks going from a streaming tool through the daemon to a
// subscriber on another (host-role) connection: chunks per second, and the
// latency of one chunk (tool write to subscriber read) at p50 and p99,
// beside a raw JSON-RPC round trip (state.exists) measured in the same run.
// Each chunk carries its send time. In burst mode the tool writes as fast
// as it can (throughput; latency there is mostly queueing, and events a
// lagging subscriber's queue dropped are counted, not timed); in paced mode
// it writes the next chunk once the subscriber has seen the last (latency).
func BenchmarkStreamChunks(b *testing.B) {
	b.Run("mode=burst", func(b *testing.B) { benchStream(b, false) })
	b.Run("mode=paced", func(b *testing.B) { benchStream(b, true) })
}

func benchStream(b *testing.B, paced bool) {
	const chunks = 5000
	seen := make(chan struct{}, 1)
	ts := startServerWith(b, serverSetup{opts: Options{HostToken: "host"}})
	ctx := context.Background()
	tool, err := client.Dial(ctx, ts.url, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer tool.Close()
	tool.HandleRequest(protocol.MethodToolsExecute, func(_ context.Context, raw json.RawMessage) (any, error) {
		var call protocol.ToolExecuteParams
		if err := json.Unmarshal(raw, &call); err != nil {
			return nil, err
		}
		return tool.Stream(call, func(ctx context.Context, _ protocol.ToolExecuteParams, w *client.ChunkWriter) (any, error) {
			for i := 0; i < chunks; i++ {
				if err := w.Text(ctx, strconv.FormatInt(time.Now().UnixNano(), 10)); err != nil {
					return nil, err
				}
				if paced {
					select {
					case <-seen:
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				}
			}
			return nil, nil
		})
	})
	if err := tool.Call(ctx, protocol.MethodToolsRegister, []protocol.ToolSchema{{Name: "tail"}}, nil); err != nil {
		b.Fatal(err)
	}
	sub, err := client.Dial(ctx, ts.url, &client.Options{HostToken: "host"})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	var mu sync.Mutex
	var latencies []time.Duration
	var dropped uint64
	done := make(chan struct{}, 1)
	sub.HandleNotification(protocol.MethodToolsStreamEvent, func(raw json.RawMessage) {
		now := time.Now()
		var e struct {
			Chunk   protocol.ToolStreamChunk `json:"chunk"`
			Dropped uint64                   `json:"dropped"`
		}
		if json.Unmarshal(raw, &e) != nil {
			return
		}
		mu.Lock()
		dropped += e.Dropped
		if e.Chunk.Text != nil {
			if sent, err := strconv.ParseInt(*e.Chunk.Text, 10, 64); err == nil {
				latencies = append(latencies, now.Sub(time.Unix(0, sent)))
			}
		}
		mu.Unlock()
		if paced && e.Chunk.Kind == protocol.ChunkText {
			seen <- struct{}{}
		}
		if e.Chunk.Kind == protocol.ChunkDone {
			done <- struct{}{}
		}
	})
	if err := sub.Call(ctx, protocol.MethodToolsStreamSubscribe, nil, nil); err != nil {
		b.Fatal(err)
	}
	params := map[string]any{"proposal": map[string]any{"actions": []any{
		map[string]any{"id": "s", "type": "tool_call", "tool": "tail", "invocation_mode": "streaming"},
	}}}
	probe := map[string]any{"key": "k"}

	var rounds []time.Duration
	var streamed time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := 0; j < 1000; j++ {
			start := time.Now()
			if err := tool.Call(ctx, protocol.MethodStateExists, probe, nil); err != nil {
				b.Fatal(err)
			}
			rounds = append(rounds, time.Since(start))
		}
		start := time.Now()
		var res protocol.ProposalResult
		if err := tool.Call(ctx, protocol.MethodProposalSubmit, params, &res); err != nil {
			b.Fatal(err)
		}
		select {
		case <-done:
		case <-time.After(time.Minute):
			b.Fatal("the subscriber never saw the done chunk")
		}
		streamed += time.Since(start)
	}
	b.StopTimer()
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(latencies)
	slices.Sort(rounds)
	pct := func(d []time.Duration, p float64) float64 {
		if len(d) == 0 {
			return 0
		}
		return float64(d[int(float64(len(d)-1)*p)].Nanoseconds())
	}
	total := float64(b.N * chunks)
	b.ReportMetric(total/streamed.Seconds(), "chunks/s")
	b.ReportMetric(pct(latencies, 0.50), "ns/chunk-p50")
	b.ReportMetric(pct(latencies, 0.99), "ns/chunk-p99")
	b.ReportMetric(pct(rounds, 0.50), "ns/roundtrip-p50")
	b.ReportMetric(pct(rounds, 0.99), "ns/roundtrip-p99")
	b.ReportMetric(float64(dropped)/total, "dropped/chunk")
}
