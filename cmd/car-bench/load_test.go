package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/rpc"
	"github.com/parslee-ai/car-server/internal/store/file"
)

// startServer serves a daemon's JSON-RPC surface on a loopback port until
// the test ends.
func startServer(t *testing.T) (*rpc.Server, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rt := engine.NewRuntime(engine.Options{State: file.NewState()})
	srv := rpc.NewServer(rt, rpc.Options{Token: "tok"})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		if err := <-served; err != nil {
			t.Error(err)
		}
		rt.Close()
	})
	return srv, "ws://" + l.Addr().String() + "/"
}

// TestConnectionsRoundRobin: repeated --url spreads the connections over the
// daemons in turn, and a run over them completes.
func TestConnectionsRoundRobin(t *testing.T) {
	a, urlA := startServer(t)
	b, urlB := startServer(t)
	o, err := parseArgs([]string{"--url", urlA, "--url", urlB, "--token", "tok", "--connections", "5", "--proposals", "2", "--actions", "3", "--baseline", "2"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clients, err := dialAll(ctx, o, o.Connections, false)
	if err != nil {
		t.Fatal(err)
	}
	na, nb := a.ConnectionCount(), b.ConnectionCount()
	closeAll(clients)
	if na != 3 || nb != 2 {
		t.Fatalf("5 connections went %d and %d, want 3 and 2", na, nb)
	}
	rep, err := runLoad(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Errors != 0 || rep.ProposalsDone != 10 || rep.Baseline.Count != 10 || rep.Beside.Count != 1 { // one in ten: connection 0's first proposal
		t.Fatalf("report: %d errors %v, %d proposals, %d round trips, %d beside the proposals", rep.Errors, rep.ErrorSamples, rep.ProposalsDone, rep.Baseline.Count, rep.Beside.Count)
	}
	if rep.P99ToBesideP99 != rep.Latency.P99Ms/rep.Beside.P99Ms || rep.P99ToBesideP99 <= 0 {
		t.Fatalf("proposal p99 %v over beside p99 %v reported as %v", rep.Latency.P99Ms, rep.Beside.P99Ms, rep.P99ToBesideP99)
	}
	if rep.P99ToMean != rep.Latency.P99Ms/rep.Latency.MeanMs || rep.P99ToMean < 1 {
		t.Fatalf("proposal p99 %v over mean %v reported as %v", rep.Latency.P99Ms, rep.Latency.MeanMs, rep.P99ToMean)
	}
	// Two daemons, so no daemon's CPU: car-bench's own, per unit of each phase.
	if runtime.GOOS == "linux" {
		c := rep.CPU
		if c == nil || c.PerRoundTrip.BenchUs <= 0 || c.PerProposal.BenchUs <= 0 || c.PerRoundTrip.DaemonUs != 0 || c.PerProposal.DaemonUs != 0 ||
			c.ProposalToRoundTrip != c.PerProposal.BenchUs/c.PerRoundTrip.BenchUs || c.P99RatioToCPURatio != rep.P99ToRoundTripP99/c.ProposalToRoundTrip {
			t.Fatalf("CPU over two daemons: %+v, want car-bench's alone", c)
		}
	}
}

// TestChainRun: chained proposals on one connection, with the baseline's
// round trips shared out before them, also when there are fewer round trips
// than proposals.
func TestChainRun(t *testing.T) {
	_, url := startServer(t)
	for _, tc := range []struct{ proposals, baseline int }{{3, 7}, {3, 2}} {
		o, err := parseArgs([]string{"--url", url, "--token", "tok", "--chain", "4", "--proposals", strconv.Itoa(tc.proposals), "--baseline", strconv.Itoa(tc.baseline)}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		rep, err := runChain(ctx, o)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if rep.Errors != 0 || rep.ProposalsDone != tc.proposals || rep.Baseline.Count != tc.baseline {
			t.Fatalf("%d proposals, %d round trips: %d errors %v, %d proposals, %d round trips", tc.proposals, tc.baseline, rep.Errors, rep.ErrorSamples, rep.ProposalsDone, rep.Baseline.Count)
		}
		if ch := rep.Chain; ch == nil || ch.Actions != 4 || ch.Ratio <= 0 || ch.Ratio != ch.PerActionMs/ch.RoundTripMs {
			t.Fatalf("chain report %+v", rep.Chain)
		}
	}
}

// TestDurableChainRun: --durable-chain runs its idempotent chains against a
// daemon with a journaled idempotency cache, every step a miss that is
// recorded (a hit would be counted as an error), beside the plain chain,
// the round trips and the flushes, and writes them all in the report.
func TestDurableChainRun(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	idem, _, err := file.OpenIdempotency(filepath.Join(dir, "idempotency.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	rt := engine.NewRuntime(engine.Options{State: file.NewState(), Idempotency: idem})
	srv := rpc.NewServer(rt, rpc.Options{Token: "tok"})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		if err := <-served; err != nil {
			t.Error(err)
		}
		rt.Close()
		idem.Close()
	})
	url := "ws://" + l.Addr().String() + "/"
	o, err := parseArgs([]string{"--url", url, "--token", "tok", "--durable-chain", "5", "--proposals", "3", "--baseline", "6", "--fsync-probes", "4", "--fsync-dir", dir}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := runDurableChain(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	d := rep.Durable
	if rep.Errors != 0 || rep.ProposalsDone != 3 || d == nil || d.Plain.Count != 3 || rep.Baseline.Count != 6 || d.Fdatasync.Count != 4 || d.AppendFsync.Count != 4 {
		t.Fatalf("%d errors %v, %d durable proposals, report %+v", rep.Errors, rep.ErrorSamples, rep.ProposalsDone, d)
	}
	if d.DurableStepMs != rep.Latency.MeanMs/5 || d.ExtraToFlush != (d.DurableStepMs-d.PlainStepMs)/d.FdatasyncMs {
		t.Fatalf("report %+v", d)
	}
	// 3 chains of 5 results were recorded: each step ran and was journaled
	// (besides the results, the journal holds the start's generation).
	recorded, err := os.ReadFile(filepath.Join(dir, "idempotency.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(recorded, []byte(`"op":"put"`)); n != 15 {
		t.Fatalf("%d results in the journal, want 15", n)
	}
	// The probe's files are gone.
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("left in the probe directory: %v", entries)
	}
	// Run again with the same daemon: parameters are new, so still no hit.
	rep, err = runDurableChain(ctx, o)
	if err != nil || rep.Errors != 0 {
		t.Fatalf("second run: %v %v", err, rep.ErrorSamples)
	}
}
