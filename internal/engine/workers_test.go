package engine

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/testwait"
	"github.com/parslee-ai/car-server/protocol"
)

// poolState is what a pool holds now: parked workers, workers alive,
// workers ever started.
type poolState struct{ idle, count, starts int }

func (p *workers) state() poolState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return poolState{len(p.idle), p.count, p.starts}
}

// waitPool waits until the pool holds want: a worker parks after its
// function has returned, on its own goroutine.
func waitPool(t *testing.T, p *workers, want poolState) {
	t.Helper()
	testwait.Eventually(t, testTimeout, fmt.Sprintf("the pool holding %+v", want), func() bool { return p.state() == want })
}

// testPool is a pool whose sweep the test runs by hand: its timer never
// fires within a test.
func testPool(t *testing.T, maxIdle int) *workers {
	p := newWorkers(maxIdle, time.Hour)
	t.Cleanup(p.close)
	return p
}

// gate is a channel that release closes, and the test's end if nothing
// did: a test that fails leaves no worker waiting on it.
func gate(t *testing.T) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	release := sync.OnceFunc(func() { close(ch) })
	t.Cleanup(release)
	return ch, release
}

// blocked starts n functions on p that wait for release, and returns once
// all of them run.
func blocked(p *workers, n int, release <-chan struct{}) {
	var running sync.WaitGroup
	running.Add(n)
	for range n {
		p.run(func() {
			running.Done()
			<-release
		})
	}
	running.Wait()
}

func TestWorkersReuseAParkedWorker(t *testing.T) {
	p := testPool(t, 4)
	for i := range 3 {
		done := make(chan int)
		p.run(func() { done <- i })
		if got := <-done; got != i {
			t.Fatalf("function %d ran as %d", i, got)
		}
		waitPool(t, p, poolState{idle: 1, count: 1, starts: 1})
	}
}

func TestWorkersParkAtMostMax(t *testing.T) {
	p := testPool(t, 2)
	wait, release := gate(t)
	blocked(p, 3, wait)
	if got := p.state(); got != (poolState{idle: 0, count: 3, starts: 3}) {
		t.Fatalf("three running: %+v", got)
	}
	release()
	waitPool(t, p, poolState{idle: 2, count: 2, starts: 3})
}

func TestWorkersSweepStopsOnlyThoseParkedSinceTheLastSweep(t *testing.T) {
	p := testPool(t, 8)
	wait, release := gate(t)
	blocked(p, 3, wait)
	release()
	waitPool(t, p, poolState{idle: 3, count: 3, starts: 3})
	p.sweepIdle() // the first sweep since they parked: none was parked all along
	if got := p.state(); got != (poolState{idle: 3, count: 3, starts: 3}) {
		t.Fatalf("after the first sweep: %+v", got)
	}
	// One is taken between the sweeps: the two others were parked all
	// along and stop; the one taken parks again after the sweep and stays.
	wait, release = gate(t)
	blocked(p, 1, wait)
	p.sweepIdle()
	if got := p.state(); got != (poolState{idle: 0, count: 1, starts: 3}) {
		t.Fatalf("after the second sweep: %+v", got)
	}
	release()
	waitPool(t, p, poolState{idle: 1, count: 1, starts: 3})
	p.sweepIdle()
	p.sweepIdle()
	if got := p.state(); got != (poolState{idle: 0, count: 0, starts: 3}) {
		t.Fatalf("after two more sweeps: %+v", got)
	}
	// A pool that was swept empty starts workers again.
	done := make(chan struct{})
	p.run(func() { close(done) })
	<-done
	waitPool(t, p, poolState{idle: 1, count: 1, starts: 4})
}

func TestWorkersCloseStopsParkedAndWaitsForRunning(t *testing.T) {
	p := testPool(t, 8)
	wait, release := gate(t)
	blocked(p, 2, wait)
	done := make(chan struct{})
	p.run(func() { close(done) })
	<-done
	waitPool(t, p, poolState{idle: 1, count: 3, starts: 3})
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		p.close()
	}()
	waitPool(t, p, poolState{idle: 0, count: 2, starts: 3}) // the parked one was told to stop
	select {
	case <-closed:
		t.Fatal("close returned while two workers were running")
	default:
	}
	release()
	select {
	case <-closed:
	case <-time.After(testTimeout):
		t.Fatal("close did not return once the running workers finished")
	}
	if got := p.state(); got != (poolState{idle: 0, count: 0, starts: 3}) {
		t.Fatalf("after close: %+v", got)
	}
	// After close a function still runs, on a worker that does not park.
	ran := make(chan struct{})
	p.run(func() { close(ran) })
	<-ran
	waitPool(t, p, poolState{idle: 0, count: 0, starts: 4})
}

// TestRunsShareTheRuntimesWorkers: a second proposal of independent actions
// runs on the workers the first one left parked, not on new ones.
func TestRunsShareTheRuntimesWorkers(t *testing.T) {
	rt, s := openRuntime(t, Options{}, &countingExecutor{}, "read")
	submit := func() {
		t.Helper()
		p := &protocol.ActionProposal{}
		for range 3 {
			p.Actions = append(p.Actions, protocol.Action{Type: protocol.ActionToolCall, Tool: "read", Parameters: map[string]any{}, FailureBehavior: protocol.FailAbort})
		}
		res, err := rt.Submit(ctxT(t), &Submission{Proposal: p, Session: s})
		if err != nil || res.Cost.ActionsExecuted != 3 {
			t.Fatalf("submit: %v %+v", err, res)
		}
	}
	submit()
	waitPool(t, rt.workers, poolState{idle: 3, count: 3, starts: 3})
	submit()
	waitPool(t, rt.workers, poolState{idle: 3, count: 3, starts: 3})
}
