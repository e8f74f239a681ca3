package engine

import (
	"context"
	"testing"
	"time"
)

// enqueue runs wait for session on a goroutine, returns once the proposal
// waits in line (or has its place), and delivers its release once it has
// a place.
func enqueue(t *testing.T, a *admission, ctx context.Context, session string) <-chan func() {
	t.Helper()
	before := a.waiting()
	rel := make(chan func(), 1)
	go func() { rel <- a.wait(ctx, session) }()
	deadline := time.Now().Add(30 * time.Second)
	for a.waiting() == before && len(rel) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the proposal neither waits nor started")
		}
		time.Sleep(time.Millisecond) // polling: the goroutine has to get to its wait
	}
	return rel
}

// state is the admission's places taken, proposals waiting and sessions in
// line.
func state(a *admission) (taken, waiting, turns int) {
	waiting = a.waiting()
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.taken, waiting, len(a.turns)
}

// started reports whether a proposal's release has been delivered.
func started(rel <-chan func()) bool { return len(rel) > 0 }

func TestAdmissionBoundsStartsAndHandsPlacesOn(t *testing.T) {
	a := &admission{max: 2, lease: time.Hour, queue: map[string][]*admissionTicket{}}
	r1 := a.wait(context.Background(), "a")
	r2 := a.wait(context.Background(), "b")
	rel3 := enqueue(t, a, context.Background(), "c")
	if started(rel3) {
		t.Fatal("a third proposal started with two places, both taken")
	}
	r1()
	r1() // twice frees one place, not two
	release3 := <-rel3
	rel4 := enqueue(t, a, context.Background(), "d")
	if started(rel4) {
		t.Fatal("a place was given back twice")
	}
	r2()
	(<-rel4)()
	release3()
	if taken, waiting, _ := state(a); taken != 0 || waiting != 0 {
		t.Fatalf("%d places taken and %d waiting after every release", taken, waiting)
	}
}

// TestAdmissionTakesSessionsInTurn: a session with many proposals waiting
// gets one place per turn, and a session that waits after it gets the next
// place, not the end of the line.
func TestAdmissionTakesSessionsInTurn(t *testing.T) {
	a := &admission{max: 1, lease: time.Hour, queue: map[string][]*admissionTicket{}}
	held := a.wait(context.Background(), "flood")
	var flood []<-chan func()
	for range 3 {
		flood = append(flood, enqueue(t, a, context.Background(), "flood"))
	}
	quiet := enqueue(t, a, context.Background(), "quiet")

	held()
	r := <-flood[0] // the flood's oldest: its session was first in line
	if started(quiet) || started(flood[1]) {
		t.Fatal("a freed place went to more than one proposal")
	}
	r()
	r = <-quiet // then the other session's turn, ahead of the flood's others
	if started(flood[1]) {
		t.Fatal("the flood's second proposal started before the other session's first")
	}
	r()
	(<-flood[1])()
	(<-flood[2])()
	if taken, waiting, turns := state(a); taken != 0 || waiting != 0 || turns != 0 {
		t.Fatalf("%d taken, %d waiting, %d sessions in line", taken, waiting, turns)
	}
}

func TestAdmissionWaitEndsWithItsContext(t *testing.T) {
	a := &admission{max: 1, lease: time.Hour, queue: map[string][]*admissionTicket{}}
	held := a.wait(context.Background(), "a")
	ctx, cancel := context.WithCancel(context.Background())
	rel := enqueue(t, a, ctx, "b")
	later := enqueue(t, a, context.Background(), "c")
	cancel()
	(<-rel)() // a release that holds no place frees none
	if a.waiting() != 1 || started(later) {
		t.Fatalf("after a cancelled wait: %d waiting, want the later one", a.waiting())
	}
	held()
	(<-later)()
	if taken, _, turns := state(a); taken != 0 || turns != 0 {
		t.Fatalf("%d taken, %d sessions in line", taken, turns)
	}
}

func TestAdmissionLeaseGivesThePlaceBack(t *testing.T) {
	a := &admission{max: 1, lease: time.Millisecond, queue: map[string][]*admissionTicket{}}
	first := a.wait(context.Background(), "a") // never released by its holder in time
	rel := make(chan func(), 1)
	go func() { rel <- a.wait(context.Background(), "b") }()
	select {
	case r := <-rel:
		r()
	case <-time.After(30 * time.Second):
		t.Fatal("the lease never gave the place back")
	}
	first() // after its lease ran out: frees nothing more
	deadline := time.Now().Add(30 * time.Second)
	for { // the second one's lease may be giving its place back right now
		if taken, _, _ := state(a); taken == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a place is still taken after both were given back")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestAdmissionUnbounded(t *testing.T) {
	a := newAdmission(-1)
	for range 100 {
		defer a.wait(context.Background(), "a")()
	}
	if d := newAdmission(0); d.max < startingPerCore {
		t.Fatalf("the default bound is %d", d.max)
	}
}
