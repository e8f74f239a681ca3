package rpc

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/store/file"
	"github.com/parslee-ai/car-server/protocol"
)

// BenchmarkDurableEventLog measures, in one run, proposals on a daemon
// whose events live in memory only and on one whose events are also
// written to the file store's durable log (segments through the journal's
// group commit, the reply after the proposal's events are on disk), the
// two taking turns proposal by proposal. It reports the durable log's
// cost as the ratio of the two times (durable/memory).
func BenchmarkDurableEventLog(b *testing.B) {
	for _, c := range []struct {
		name    string
		actions int
		chain   bool
	}{{"chain=300", 300, true}, {"independent=1000", 1000, false}} {
		b.Run(c.name, func(b *testing.B) { benchDurable(b, c.actions, c.chain) })
	}
}

// benchClient connects a client serving the tool noop to ts.
func benchClient(b *testing.B, ts *testServer) *client.Client {
	c, err := client.Dial(context.Background(), ts.url, nil)
	if err != nil {
		b.Fatal(err)
	}
	c.HandleRequest(protocol.MethodToolsExecute, func(_ context.Context, _ json.RawMessage) (any, error) {
		return map[string]any{"ok": true}, nil
	})
	if err := c.Call(context.Background(), protocol.MethodToolsRegister, []protocol.ToolSchema{{Name: "noop"}}, nil); err != nil {
		b.Fatal(err)
	}
	return c
}

func benchDurable(b *testing.B, actions int, chain bool) {
	dir := b.TempDir()
	events, err := file.OpenEvents(file.EventsConfig{Dir: filepath.Join(dir, "events"), KeyPath: filepath.Join(dir, "audit-key"), Node: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	memory := startServerWith(b, serverSetup{})
	durable := startServerWith(b, serverSetup{closeAfter: events.Close})
	if err := durable.rt.Events.JoinCluster(context.Background(), "bench", events); err != nil {
		b.Fatal(err)
	}
	cm, cd := benchClient(b, memory), benchClient(b, durable)
	defer cm.Close()
	defer cd.Close()
	params := noopProposal(actions, chain)
	var mem, dur, fsync time.Duration
	var memAllocs, durAllocs uint64
	var memCPU, durCPU time.Duration
	probe, err := os.Create(filepath.Join(dir, "fsync-probe"))
	if err != nil {
		b.Fatal(err)
	}
	defer probe.Close()
	ratios := make([]float64, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// The two take turns, each going first every other time.
		sides := []*client.Client{cm, cd}
		if i%2 == 1 {
			sides[0], sides[1] = cd, cm
		}
		var took [2]time.Duration
		for _, c := range sides {
			cpu0 := processCPU(b)
			res, t, a := submitMeasured(b, c, params)
			cpu := processCPU(b) - cpu0
			if c == cm {
				memAllocs += a
				memCPU += cpu
			} else {
				durAllocs += a
				durCPU += cpu
			}
			if res.Cost.ActionsExecuted != actions {
				b.Fatalf("%d actions executed of %d", res.Cost.ActionsExecuted, actions)
			}
			if c == cm {
				took[0] = t
			} else {
				took[1] = t
			}
		}
		mem += took[0]
		dur += took[1]
		fsync += measureFsync(b, probe)
		ratios = append(ratios, float64(took[1])/float64(took[0]))
	}
	b.StopTimer()
	n := float64(b.N)
	slices.Sort(ratios)
	b.ReportMetric(float64(mem.Microseconds())/n, "µs/proposal-memory")
	b.ReportMetric(float64(dur.Microseconds())/n, "µs/proposal-durable")
	b.ReportMetric(float64(dur)/float64(mem), "durable/memory")
	b.ReportMetric(ratios[len(ratios)/2], "median-durable/memory")
	b.ReportMetric(float64(fsync.Microseconds())/n, "µs/fsync")
	b.ReportMetric(float64(durAllocs)/float64(memAllocs), "allocs-durable/memory")
	b.ReportMetric(float64(durCPU)/float64(memCPU), "cpu-durable/memory")
	b.ReportMetric(float64(events.Stats().Events)/n, "events/proposal")
}

// measureFsync is how long one small write and its fsync take now, on the
// disk the log is on: the least the reply to a proposal waits for.
func measureFsync(b *testing.B, f *os.File) time.Duration {
	start := time.Now()
	if _, err := f.Write(make([]byte, 4096)); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// processCPU is the CPU time this process has used, user and system: the
// client and the server of the benchmark, and the writer of the log.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
