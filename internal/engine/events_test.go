package engine

import (
	"sync"
	"testing"
	"time"
)

func chainedLog(t *testing.T, n int) *EventLog {
	t.Helper()
	l := NewEventLog(0)
	l.Append(Event{Kind: EventProposalReceived}) // chained like every event
	l.EnableChain()                              // kept for compatibility: changes nothing
	for i := 0; i < n; i++ {
		l.Append(Event{Kind: EventActionSucceeded, ActionID: string(rune('a' + i)), Data: map[string]any{"i": i}})
	}
	return l
}

func TestChainDetectsTampering(t *testing.T) {
	cases := []struct {
		name   string
		tamper func(l *EventLog)
		at     int
	}{
		{"edit data", func(l *EventLog) { l.events.at(3).Data = map[string]any{"i": 99} }, 3},
		{"edit kind", func(l *EventLog) { l.events.at(2).Kind = EventActionFailed }, 2},
		{"delete interior", func(l *EventLog) {
			for i := 2; i < l.events.len()-1; i++ {
				*l.events.at(i) = *l.events.at(i + 1)
			}
			l.events.blocks[0] = l.events.blocks[0][:len(l.events.blocks[0])-1]
			l.events.n--
		}, 2},
		{"reorder", func(l *EventLog) { *l.events.at(2), *l.events.at(3) = *l.events.at(3), *l.events.at(2) }, 2},
		{"rehash an edit", func(l *EventLog) {
			l.events.at(2).ActionID = "evil"
			l.events.at(2).Hash = eventHash(l.events.at(2)) // the next link still breaks
		}, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := chainedLog(t, 5)
			if v, at := l.VerifyChain(); at != -1 || v != 6 {
				t.Fatalf("intact chain: verified %d, tampered at %d", v, at)
			}
			tc.tamper(l)
			if _, at := l.VerifyChain(); at != tc.at {
				t.Fatalf("tampered at %d, want %d", at, tc.at)
			}
		})
	}
}

func TestEventLogBoundsAndRetention(t *testing.T) {
	l := NewEventLog(3)
	for i := 0; i < 5; i++ {
		l.Append(Event{Kind: EventStateChanged})
	}
	if l.Count() != 3 || l.Query(EventQuery{})[0].Seq != 5 {
		t.Fatalf("capacity not enforced: %d", l.Count())
	}
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l = NewEventLog(0)
	l.now = func() time.Time { return clock }
	l.Append(Event{Kind: EventStateChanged})
	clock = clock.Add(time.Hour)
	l.Append(Event{Kind: EventStateChanged})
	age := uint64(60)
	if removed := l.SetRetention(RetentionPolicy{MaxAgeSecs: &age}); removed != 1 || l.Count() != 1 {
		t.Fatalf("age sweep removed %d, kept %d", removed, l.Count())
	}
	since := clock.Add(-time.Minute)
	if got := l.Query(EventQuery{Since: &since}); len(got) != 1 {
		t.Fatalf("since filter: %d", len(got))
	}
	until := clock
	if got := l.Query(EventQuery{Until: &until}); len(got) != 0 {
		t.Fatalf("until is exclusive: %d", len(got))
	}
}

func TestEventLogStaysBoundedUnderManyAppends(t *testing.T) {
	l := NewEventLog(3)
	for i := 0; i < 5000; i++ {
		l.Append(Event{Kind: EventStateChanged})
	}
	got := l.Query(EventQuery{})
	if len(got) != 3 || got[0].Seq != 5000 || got[2].Seq != 4998 {
		t.Fatalf("kept %d events, newest %d", len(got), got[0].Seq)
	}
	if b := len(l.events.blocks); b > 2 {
		t.Fatalf("3 events kept in %d blocks", b)
	}
}

// Once the log is full each event takes the oldest one's slot: queries,
// retention, the chain check and the summary read the ring in order.
func TestEventLogWrapsInOrder(t *testing.T) {
	l := NewEventLog(5)
	l.EnableChain()
	for i := 1; i <= 12; i++ {
		kind := EventActionSucceeded
		if i%2 == 0 {
			kind = EventActionFailed
		}
		l.Append(Event{Kind: kind, Data: map[string]any{"duration_ms": float64(i)}})
	}
	seqs := func() []uint64 {
		var out []uint64
		for _, e := range l.Query(EventQuery{}) {
			out = append(out, e.Seq)
		}
		return out
	}
	if got := seqs(); len(got) != 5 || got[0] != 12 || got[4] != 8 {
		t.Fatalf("kept %v, want 12 down to 8", got)
	}
	if v, at := l.VerifyChain(); v != 5 || at != -1 {
		t.Fatalf("chain over the wrapped log: verified %d, broken at %d", v, at)
	}
	if s := l.Summary(); s.TotalEvents != 5 || s.ActionsSucceeded != 2 || s.ActionsFailed != 3 || s.AvgLatencyMs != 10 {
		t.Fatalf("summary %+v", s)
	}
	two := uint64(2)
	if removed := l.SetRetention(RetentionPolicy{MaxEvents: &two}); removed != 3 {
		t.Fatalf("retention removed %d, want 3", removed)
	}
	l.Append(Event{Kind: EventStateChanged})
	if got := seqs(); len(got) != 2 || got[0] != 13 || got[1] != 12 {
		t.Fatalf("kept %v after max_events 2, want [13 12]", got)
	}
	if got := l.Query(EventQuery{AfterCursor: 12}); len(got) != 1 || got[0].Seq != 13 {
		t.Fatalf("after cursor 12: %+v", got)
	}
}

func TestSubscribersSeeMatchingEventsInSeqOrder(t *testing.T) {
	l := NewEventLog(0)
	l.Append(Event{Kind: EventProposalReceived})
	var all, failed []uint64
	cursor, cancelAll := l.Subscribe(EventQuery{}, func(e Event) { all = append(all, e.Seq) })
	_, cancelFailed := l.Subscribe(EventQuery{Kinds: []EventKind{EventActionFailed}, ProposalID: "p"}, func(e Event) { failed = append(failed, e.Seq) })
	defer cancelFailed()
	if cursor != 1 {
		t.Fatalf("subscribe cursor %d, want 1 (the last event before it)", cursor)
	}
	const writers, each = 8, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				kind := EventActionSucceeded
				if i%10 == 0 {
					kind = EventActionFailed
				}
				l.Append(Event{Kind: kind, ProposalID: string(rune('p' + w%2))})
			}
		})
	}
	wg.Wait()
	if len(all) != writers*each {
		t.Fatalf("unfiltered subscriber saw %d events, want %d", len(all), writers*each)
	}
	for i, seq := range all {
		if seq != cursor+uint64(i)+1 {
			t.Fatalf("unfiltered subscriber's event %d has seq %d, want %d: not contiguous", i, seq, cursor+uint64(i)+1)
		}
	}
	want := l.Query(EventQuery{Kinds: []EventKind{EventActionFailed}, ProposalID: "p"})
	if len(failed) != len(want) || len(want) == 0 {
		t.Fatalf("filtered subscriber saw %d events, the log holds %d matching", len(failed), len(want))
	}
	for i := range failed {
		if failed[i] != want[len(want)-1-i].Seq {
			t.Fatalf("filtered subscriber's event %d has seq %d, want %d", i, failed[i], want[len(want)-1-i].Seq)
		}
	}
	cancelAll()
	l.Append(Event{Kind: EventActionSucceeded})
	if len(all) != writers*each {
		t.Fatal("a cancelled subscriber was called")
	}
}

func TestQueryAfterCursor(t *testing.T) {
	l := NewEventLog(0)
	for range 5 {
		l.Append(Event{Kind: EventActionSucceeded})
	}
	got := l.Query(EventQuery{AfterCursor: 3})
	if len(got) != 2 || got[0].Seq != 5 || got[1].Seq != 4 {
		t.Fatalf("after_cursor 3: %+v", got)
	}
}

func TestSummaryCallbackPercentilesCountOnlyCallbacks(t *testing.T) {
	l := NewEventLog(1000)
	for d := 1; d <= 100; d++ {
		l.Append(Event{Kind: EventActionSucceeded, Data: map[string]any{"type": "tool_call", "duration_ms": float64(d)}})
	}
	// Neither a built-in action nor a cache hit made a callback.
	l.Append(Event{Kind: EventActionSucceeded, Data: map[string]any{"type": "state_write", "duration_ms": 5000.0}})
	l.Append(Event{Kind: EventActionSucceeded, Data: map[string]any{"type": "tool_call", "duration_ms": 9000.0, "cache_hit": "idempotency"}})
	s := l.Summary()
	if s.CallbackP50Ms != 50 || s.CallbackP99Ms != 99 {
		t.Fatalf("p50 %v p99 %v, want 50 and 99", s.CallbackP50Ms, s.CallbackP99Ms)
	}
	if empty := NewEventLog(10).Summary(); empty.CallbackP50Ms != 0 || empty.CallbackP99Ms != 0 {
		t.Fatalf("no callbacks: %+v", empty)
	}
}
