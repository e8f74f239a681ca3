package engine

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// admissionLease is how long a started proposal counts against
// MaxStarting. Past it the proposal runs on without a place: one that waits
// for a slow tool, a supervisor, a person or a proposal of its own holds no
// one else up for longer than this.
const admissionLease = 100 * time.Millisecond

// startingPerCore is MaxStarting's default per CPU the runtime may use.
const startingPerCore = 16

// admission starts proposals at most max at a time in their first lease,
// and hands a freed place to the sessions that wait in turn: the oldest
// proposal of the next session in line, so that a session with many
// proposals waiting does not hold up one with a single proposal.
//
// Without it, a thousand connections submitting at once run a thousand
// proposals at once: each step of each one (the gates, each callback, each
// event, the reply) waits behind every other proposal's steps, so all of
// them finish late and the unluckiest far later than the rest. Started a
// few at a time, a proposal runs its steps back to back, and the waiting is
// done once, in line.
type admission struct {
	max   int // 0: no bound
	lease time.Duration

	mu    sync.Mutex
	taken int                           // places held
	queue map[string][]*admissionTicket // waiting proposals by session, oldest first; only sessions that wait
	turns []string                      // the sessions that wait, in the order they are served
}

// admissionTicket is a waiting proposal.
type admissionTicket struct {
	ready   chan struct{} // closed when it is given a place
	granted bool          // under mu
}

func newAdmission(max int) *admission {
	if max == 0 {
		max = startingPerCore * runtime.GOMAXPROCS(0)
	}
	if max < 0 {
		max = 0
	}
	return &admission{max: max, lease: admissionLease, queue: make(map[string][]*admissionTicket)}
}

// wait returns once a proposal of session may start, or ctx has ended (the
// proposal then starts at once and sees its context done). release gives
// the place back; it may be called more than once, and the lease gives it
// back by itself.
func (a *admission) wait(ctx context.Context, session string) (release func()) {
	if a.max == 0 {
		return func() {}
	}
	a.mu.Lock()
	if a.taken < a.max && len(a.turns) == 0 {
		a.taken++
		a.mu.Unlock()
		return a.placed()
	}
	t := &admissionTicket{ready: make(chan struct{})}
	if len(a.queue[session]) == 0 {
		a.turns = append(a.turns, session)
	}
	a.queue[session] = append(a.queue[session], t)
	a.mu.Unlock()

	select {
	case <-t.ready:
		return a.placed()
	case <-ctx.Done():
	}
	a.mu.Lock()
	if t.granted { // given a place as its context ended: pass it on
		a.mu.Unlock()
		a.free()
		return func() {}
	}
	a.forget(session, t)
	a.mu.Unlock()
	return func() {}
}

// placed is the release of a place just taken, with its lease running.
func (a *admission) placed() func() {
	var done atomic.Bool
	give := func() {
		if done.CompareAndSwap(false, true) {
			a.free()
		}
	}
	lease := time.AfterFunc(a.lease, give)
	return func() {
		lease.Stop()
		give()
	}
}

// free hands a place to the next session in turn, or gives it back.
func (a *admission) free() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.turns) == 0 {
		a.taken--
		return
	}
	session := a.turns[0]
	a.turns = a.turns[1:]
	waiting := a.queue[session]
	t := waiting[0]
	if len(waiting) == 1 {
		delete(a.queue, session)
	} else {
		a.queue[session] = waiting[1:]
		a.turns = append(a.turns, session) // its next proposal waits for its next turn
	}
	t.granted = true
	close(t.ready)
}

// forget drops a ticket that stopped waiting; a.mu is held.
func (a *admission) forget(session string, t *admissionTicket) {
	waiting := a.queue[session]
	for i, w := range waiting {
		if w == t {
			waiting = append(waiting[:i:i], waiting[i+1:]...)
			break
		}
	}
	if len(waiting) > 0 {
		a.queue[session] = waiting
		return
	}
	delete(a.queue, session)
	for i, s := range a.turns {
		if s == session {
			a.turns = append(a.turns[:i:i], a.turns[i+1:]...)
			break
		}
	}
}

// waiting is how many proposals wait for a place.
func (a *admission) waiting() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, w := range a.queue {
		n += len(w)
	}
	return n
}
