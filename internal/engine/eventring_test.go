package engine

import "testing"

// TestEventRing pushes and drops across block boundaries and reads every
// event back in order; dropped events are not kept reachable.
func TestEventRing(t *testing.T) {
	var r eventRing
	next, oldest := uint64(1), uint64(1)
	check := func(step string) {
		t.Helper()
		if r.len() != int(next-oldest) {
			t.Fatalf("%s: %d held, want %d", step, r.len(), next-oldest)
		}
		for i := range r.len() {
			if got := r.at(i).Seq; got != oldest+uint64(i) {
				t.Fatalf("%s: event %d is %d, want %d", step, i, got, oldest+uint64(i))
			}
		}
		if want := (r.head + r.n + eventBlock - 1) / eventBlock; len(r.blocks) != want {
			t.Fatalf("%s: %d blocks for %d events from offset %d, want %d", step, len(r.blocks), r.n, r.head, want)
		}
		if len(r.blocks) > 0 {
			for i := range r.head {
				if r.blocks[0][i].Data != nil {
					t.Fatalf("%s: a dropped event's data is still held", step)
				}
			}
		}
	}
	push := func(k int) {
		for range k {
			r.push(Event{Seq: next, Data: map[string]any{"n": next}})
			next++
		}
	}
	drop := func(k int) {
		r.dropOldest(k)
		oldest = min(oldest+uint64(k), next)
	}
	push(eventBlock + 10)
	check("past one block")
	drop(5)
	check("dropped within the first block")
	drop(eventBlock)
	check("dropped across a block end")
	push(3 * eventBlock)
	drop(2*eventBlock + 7)
	check("dropped two blocks")
	drop(r.len() + 5)
	check("dropped everything")
	push(1)
	check("after emptying")
}
