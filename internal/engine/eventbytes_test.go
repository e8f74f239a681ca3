package engine

import (
	"strings"
	"testing"
)

// The log keeps its bytes within its byte bound, oldest first, whatever
// its count allows, keeps the newest however large, and counts the bytes
// of what it holds exactly as retention drops them.
func TestEventLogBoundedByBytes(t *testing.T) {
	// An event as the log keeps it, with its hash and its link.
	probe := newEventLog(1, 0)
	for range 2 {
		probe.Append(Event{Kind: EventActionStarted, ActionID: "a", Data: map[string]any{"pad": strings.Repeat("x", 1000)}})
	}
	one := probe.Bytes()
	l := newEventLog(1000, 10*one)
	for range 25 {
		l.Append(Event{Kind: EventActionStarted, ActionID: "a", Data: map[string]any{"pad": strings.Repeat("x", 1000)}})
	}
	if l.Count() != 10 || l.Bytes() != 10*one {
		t.Fatalf("want 10 events of %d bytes, got %d events, %d bytes", one, l.Count(), l.Bytes())
	}
	if evs := l.Query(EventQuery{}); evs[len(evs)-1].Seq != 16 {
		t.Fatalf("the oldest go first: the oldest kept is %d, want 16", evs[len(evs)-1].Seq)
	}
	l.Append(Event{Kind: EventActionStarted, Data: map[string]any{"pad": strings.Repeat("x", 20*1000)}})
	if l.Count() != 1 {
		t.Fatalf("an event past the bound alone: want it kept alone, got %d events", l.Count())
	}
	max := uint64(0)
	l.SetRetention(RetentionPolicy{MaxEvents: &max})
	if l.Count() != 0 || l.Bytes() != 0 {
		t.Fatalf("after retention drops all: %d events, %d bytes", l.Count(), l.Bytes())
	}
}
