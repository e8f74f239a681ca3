package engine

import (
	"sync"
	"time"
)

// workers are the Runtime's goroutines for the actions of a run that run
// alongside others (execute). The path of a tool call is deep, and a
// goroutine starts with a small stack: one started per run grows its stack
// through several copies before its first call goes out. Handed back here
// when its run no longer needs it, a worker parks with its stack grown, and
// the next run takes it instead of starting another.
//
// At most maxIdle park at once; a worker finishing beyond that exits. A
// worker left parked from one sweep to the next, idleSweep apart, exits. The
// Runtime owns them: Close stops the parked ones and waits for the others.
type workers struct {
	mu     sync.Mutex
	idle   []*worker // parked, the most recently parked last
	low    int       // fewest parked since the last sweep: idle[:low] stayed parked all along
	max    int       // most parked at once
	every  time.Duration
	sweep  *time.Timer // runs sweepIdle; armed while any is parked
	armed  bool
	closed bool
	live   sync.WaitGroup // every worker, parked or running
	count  int            // workers alive
	starts int            // workers ever started
}

// worker is one parked goroutine: it waits on next for its next function,
// nil telling it to exit.
type worker struct{ next chan func() }

const (
	maxIdleWorkers = 1024             // parked at once, across runs
	idleSweep      = 10 * time.Second // a worker parked this long, at most twice this, exits
)

func newWorkers(maxIdle int, every time.Duration) *workers {
	return &workers{max: maxIdle, every: every}
}

// run calls f on a worker: one that is parked, or a new one.
func (p *workers) run(f func()) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.low = min(p.low, n-1)
		p.mu.Unlock()
		w.next <- f // never blocks: a parked worker's channel is empty
		return
	}
	p.live.Add(1)
	p.count++
	p.starts++
	p.mu.Unlock()
	go p.serve(&worker{next: make(chan func(), 1)}, f)
}

// serve is a worker's goroutine: it calls f, parks, and calls what it is
// handed next, until it is told to exit or cannot park.
func (p *workers) serve(w *worker, f func()) {
	defer p.live.Done()
	for f != nil {
		f()
		f = nil // nothing of the last run is kept while parked
		if !p.park(w) {
			return
		}
		f = <-w.next
	}
}

// park puts w among the idle workers and reports whether it may wait there.
func (p *workers) park(w *worker) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.idle) >= p.max {
		p.count--
		return false
	}
	p.idle = append(p.idle, w)
	if !p.armed {
		p.armed = true
		if p.sweep == nil {
			p.sweep = time.AfterFunc(p.every, p.sweepIdle)
		} else {
			p.sweep.Reset(p.every)
		}
	}
	return true
}

// sweepIdle stops the workers that stayed parked since the last sweep.
func (p *workers) sweepIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = false
	if p.closed {
		return
	}
	for _, w := range p.idle[:p.low] {
		w.next <- nil
	}
	p.count -= p.low
	n := copy(p.idle, p.idle[p.low:])
	clear(p.idle[n:])
	p.idle = p.idle[:n]
	p.low = n
	if n > 0 {
		p.armed = true
		p.sweep.Reset(p.every)
	}
}

// close stops the parked workers and waits for the running ones to finish
// what they were handed; a function handed over after close runs on a
// worker that exits after it.
func (p *workers) close() {
	p.mu.Lock()
	p.closed = true
	for _, w := range p.idle {
		w.next <- nil
	}
	p.count -= len(p.idle)
	p.idle = nil
	p.low = 0
	if p.sweep != nil {
		p.sweep.Stop()
	}
	p.mu.Unlock()
	p.live.Wait()
}
