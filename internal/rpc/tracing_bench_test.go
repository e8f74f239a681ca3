package rpc

import (
	"context"
	"runtime/pprof"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/tracing"
	"github.com/parslee-ai/car-server/internal/tracing/tracingtest"
)

// BenchmarkTracingOverhead measures, in one run, the same proposal on two
// daemons side by side over real loopback WebSockets: one with tracing off
// (no tracer: today's path) and one with tracing on at the sampler's 1.0,
// exporting over OTLP/HTTP to a real Jaeger. Each iteration submits to
// both, alternating which goes first, and reports the time and the
// allocations per action of each and the ratio on/off. The spans are
// flushed to Jaeger after each traced proposal, outside the timing; none
// may be dropped.
//
// Jaeger runs on the same cores, so its ingest competes with the daemon:
// jaeger-cpu-ns/action is the collector's processor time per traced action
// over the whole run. cpu-ns/action-off and -on are this process's own
// processor time (getrusage) per action, both daemons and both clients
// running in it one proposal at a time; on includes the flush after it, so
// every span's export is counted, inside the timing or not.
func BenchmarkTracingOverhead(b *testing.B) {
	j := tracingtest.Start(b)
	for _, tc := range []struct {
		name    string
		actions int
		chain   bool
	}{{"proposal=1000", 1000, false}, {"chain=300", 300, true}} {
		b.Run(tc.name, func(b *testing.B) { benchTracing(b, j, tc.actions, tc.chain) })
	}
}

func benchTracing(b *testing.B, j *tracingtest.Jaeger, actions int, chain bool) {
	// The goroutines of each side carry a profile label (side=off or on),
	// so that a CPU profile (-cpuprofile) tells the two apart: those the
	// provider, the servers and the clients start inherit it.
	var prov *tracing.Provider
	var err error
	pprof.Do(context.Background(), pprof.Labels("side", "on"), func(context.Context) {
		prov, err = tracing.New(context.Background(), tracing.Settings{Endpoint: j.HTTP, Sampler: "always_on"}, tracing.Resource{Version: "bench"}, zap.NewNop())
	})
	if err != nil {
		b.Fatal(err)
	}
	defer prov.Shutdown(context.Background())
	dial := func(side string, tr engine.Options, o Options) (c *client.Client) {
		pprof.Do(context.Background(), pprof.Labels("side", side), func(context.Context) {
			c = benchClient(b, startServerWith(b, serverSetup{engine: tr, opts: o}))
		})
		return c
	}
	off := dial("off", engine.Options{}, Options{})
	defer off.Close()
	on := dial("on", engine.Options{Tracer: prov.Tracer()}, Options{Tracer: prov.Tracer()})
	defer on.Close()

	params := noopProposal(actions, chain)
	var tOff, tOn, cOff, cOn time.Duration
	var aOff, aOn uint64
	run := func(c *client.Client) (time.Duration, uint64, time.Duration) {
		before := processCPU(b)
		res, took, n := submitMeasured(b, c, params)
		if res.Cost.ActionsExecuted != actions {
			b.Fatalf("executed %d", res.Cost.ActionsExecuted)
		}
		return took, n, processCPU(b) - before
	}
	jaegerBefore, jaegerOK := j.CPU()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			t, n, c := run(off)
			tOff, aOff, cOff = tOff+t, aOff+n, cOff+c
			t, n, c = run(on)
			tOn, aOn, cOn = tOn+t, aOn+n, cOn+c
		} else {
			t, n, c := run(on)
			tOn, aOn, cOn = tOn+t, aOn+n, cOn+c
			t, n, c = run(off)
			tOff, aOff, cOff = tOff+t, aOff+n, cOff+c
		}
		b.StopTimer()
		before := processCPU(b)
		if err := prov.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
		cOn += processCPU(b) - before
		b.StartTimer()
	}
	b.StopTimer()
	jaegerAfter, _ := j.CPU()
	if prov.Dropped() != 0 || prov.Exported() == 0 {
		b.Fatalf("exported %d spans, dropped %d", prov.Exported(), prov.Dropped())
	}
	n := float64(b.N * actions)
	b.ReportMetric(float64(tOff.Nanoseconds())/n, "ns/action-off")
	b.ReportMetric(float64(tOn.Nanoseconds())/n, "ns/action-on")
	b.ReportMetric(float64(tOn)/float64(tOff), "on/off")
	b.ReportMetric(float64(aOff)/n, "allocs/action-off")
	b.ReportMetric(float64(aOn)/n, "allocs/action-on")
	b.ReportMetric(float64(cOff.Nanoseconds())/n, "cpu-ns/action-off")
	b.ReportMetric(float64(cOn.Nanoseconds())/n, "cpu-ns/action-on")
	if jaegerOK {
		b.ReportMetric(float64((jaegerAfter-jaegerBefore).Nanoseconds())/n, "jaeger-cpu-ns/action")
	}
}
