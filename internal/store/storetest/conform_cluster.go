package storetest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/testwait"
)

// chainOf is n records of node's hash chain from seq first on, one a
// second, alternating two kinds and two proposals.
func chainOf(node string, first uint64, n int) []store.EventRecord {
	out := make([]store.EventRecord, n)
	prev := ""
	if first > 1 {
		prev = fmt.Sprintf("%s-%d", node, first-1)
	}
	for i := range out {
		seq := first + uint64(i)
		kind, proposal := "proposal.started", "p-even"
		if seq%2 == 1 {
			kind, proposal = "action.done", "p-odd"
		}
		out[i] = store.EventRecord{Node: node, Seq: seq, At: at(int(seq)), Kind: kind, ProposalID: proposal,
			Hash: fmt.Sprintf("%s-%d", node, seq), PrevHash: prev, Body: json.RawMessage(fmt.Sprintf(`{"seq":%d}`, seq))}
		prev = out[i].Hash
	}
	return out
}

func hashes(recs []store.EventRecord) []string {
	out := []string{}
	for _, r := range recs {
		out = append(out, r.Hash)
	}
	return out
}

func count(t *testing.T, e store.Events) int {
	t.Helper()
	n, err := e.Count(ctx(t))
	if err != nil {
		t.Fatalf("Count: %v", err)
	}
	return n
}

func testEvents(t *testing.T, open Open, opts Options) {
	if !has(opts, "Events") {
		return
	}
	t.Run("AppendQuerySinceRestart", func(t *testing.T) {
		b := newBacking(t, open)
		d := b.open("node-a")
		e := d.Events
		if head, err := e.Head(ctx(t)); err != nil || head != 0 {
			t.Fatalf("the Head of an empty log = %d %v", head, err)
		}
		if seq, hash, err := e.LastOf(ctx(t), "node-a"); err != nil || seq != 0 || hash != "" {
			t.Fatalf("LastOf on an empty log = %d %q %v", seq, hash, err)
		}
		recs := chainOf("node-a", 1, 6)
		for _, r := range recs {
			e.Append(r)
		}
		// Append does not wait for the write; LastOf counts what is not
		// written yet.
		if seq, hash, err := e.LastOf(ctx(t), "node-a"); err != nil || seq != 6 || hash != "node-a-6" {
			t.Fatalf("LastOf after the appends = %d %q %v", seq, hash, err)
		}
		testwait.Eventually(t, suiteTimeout, "the six records written", func() bool { return count(t, e) == 6 })

		all, err := e.Query(ctx(t), store.EventFilter{})
		if err != nil || !reflect.DeepEqual(hashes(all), hashes(recs)) {
			t.Fatalf("Query of everything = %v %v, want %v oldest first", hashes(all), err, hashes(recs))
		}
		for i, r := range all {
			want := recs[i]
			if r.Node != want.Node || r.Seq != want.Seq || !r.At.Equal(want.At) || r.Kind != want.Kind || r.ProposalID != want.ProposalID ||
				r.PrevHash != want.PrevHash || !sameJSON(r.Body, want.Body) || r.Pos <= 0 || (i > 0 && r.Pos <= all[i-1].Pos) {
				t.Fatalf("record %d read back as %+v, appended as %+v (positions must grow)", i, r, want)
			}
		}
		for _, c := range []struct {
			name string
			q    store.EventFilter
			want []string
		}{
			{"a kind", store.EventFilter{Kinds: []string{"action.done"}}, []string{"node-a-1", "node-a-3", "node-a-5"}},
			{"a proposal, newest two", store.EventFilter{ProposalID: "p-even", Limit: 2}, []string{"node-a-4", "node-a-6"}},
			{"since inclusive, until exclusive", store.EventFilter{Since: at(2), Until: at(4)}, []string{"node-a-2", "node-a-3"}},
			{"another node", store.EventFilter{Node: "node-z"}, []string{}},
		} {
			got, err := e.Query(ctx(t), c.q)
			if err != nil || !reflect.DeepEqual(hashes(got), c.want) {
				t.Fatalf("Query of %s = %v %v, want %v", c.name, hashes(got), err, c.want)
			}
		}

		page, next, err := e.Since(ctx(t), 0, 4, "")
		if err != nil || !reflect.DeepEqual(hashes(page), hashes(recs[:4])) || next != all[3].Pos {
			t.Fatalf("Since(0, 4) = %v next %d %v; want the first four, next %d", hashes(page), next, err, all[3].Pos)
		}
		page, next, err = e.Since(ctx(t), next, 10, "")
		if err != nil || !reflect.DeepEqual(hashes(page), hashes(recs[4:])) || next != all[5].Pos {
			t.Fatalf("Since(page 2) = %v next %d %v; want the last two, next %d", hashes(page), next, err, all[5].Pos)
		}
		if page, skipped, err := e.Since(ctx(t), 0, 10, "node-a"); err != nil || len(page) != 0 || skipped != all[5].Pos {
			t.Fatalf("Since skipping node-a = %v next %d %v; want nothing and the cursor past node-a's records", hashes(page), skipped, err)
		}
		head, err := e.Head(ctx(t))
		if err != nil || head != all[5].Pos {
			t.Fatalf("Head = %d %v, want %d", head, err, all[5].Pos)
		}

		d = b.restart(d)
		if seq, hash, err := d.Events.LastOf(ctx(t), "node-a"); err != nil || seq != 6 || hash != "node-a-6" {
			t.Fatalf("after a restart LastOf = %d %q %v", seq, hash, err)
		}
		if n := count(t, d.Events); n != 6 {
			t.Fatalf("after a restart the log holds %d records", n)
		}
	})

	if !opts.Shared {
		return
	}
	// Two daemons append at once: each reads the other's records, in
	// position order, and its own chain stays its own.
	t.Run("AcrossDaemons", func(t *testing.T) {
		b := newBacking(t, open)
		a, other := b.open("node-a").Events, b.open("node-b").Events
		race(2, func(i int) {
			l, node := a, "node-a"
			if i == 1 {
				l, node = other, "node-b"
			}
			for _, r := range chainOf(node, 1, 5) {
				l.Append(r)
			}
		})
		testwait.Eventually(t, suiteTimeout, "both daemons' records written", func() bool { return count(t, a) == 10 })
		page, _, err := a.Since(ctx(t), 0, 100, "node-a")
		if err != nil || !reflect.DeepEqual(hashes(page), hashes(chainOf("node-b", 1, 5))) {
			t.Fatalf("node-a reading the others' records = %v %v", hashes(page), err)
		}
		if seq, hash, err := a.LastOf(ctx(t), "node-b"); err != nil || seq != 5 || hash != "node-b-5" {
			t.Fatalf("node-a's LastOf(node-b) = %d %q %v", seq, hash, err)
		}
	})
}

// next waits for a payload on ch that is not a resync (nil).
func next(t *testing.T, ch <-chan []byte, what string) string {
	t.Helper()
	wait := ctx(t)
	for {
		select {
		case p := <-ch:
			if p != nil {
				return string(p)
			}
		case <-wait.Done():
			t.Fatalf("%s: nothing arrived", what)
			return ""
		}
	}
}

// listening waits for the resync (nil) with which a subscription says it
// listens.
func listening(t *testing.T, ch <-chan []byte, what string) {
	t.Helper()
	select {
	case p := <-ch:
		if p != nil {
			t.Fatalf("%s received %q before anything was published", what, p)
		}
	case <-ctx(t).Done():
		t.Fatalf("%s never resynced, so it cannot say it listens", what)
	}
}

func testBusAndMembers(t *testing.T, open Open, opts Options) {
	t.Run("OneDaemon", func(t *testing.T) {
		d := newBacking(t, open).open("node-a")
		members, err := d.Members.List(ctx(t))
		if err != nil || len(members) != 1 || members[0].ID != "node-a" || !members[0].Alive {
			t.Fatalf("Members.List = %+v %v; want node-a alone, alive", members, err)
		}
		got := make(chan []byte, 16)
		cancel := d.Bus.Subscribe("conformance", func(p []byte) { got <- p })
		if !opts.BusListensAtOnce {
			listening(t, got, "a subscription here")
		}
		for _, p := range []string{"1", "2", "3"} {
			if err := d.Bus.Publish(ctx(t), "conformance", []byte(p)); err != nil {
				t.Fatal(err)
			}
		}
		for _, want := range []string{"1", "2", "3"} {
			select {
			case p := <-got:
				if string(p) != want || p == nil {
					t.Fatalf("the bus delivered %q (nil: %v), want %q (in order, and no resync once listening)", p, p == nil, want)
				}
			case <-ctx(t).Done():
				t.Fatalf("%q published here never arrived", want)
			}
		}
		cancel()
		cancel() // a second cancel does nothing
	})

	if !opts.Shared {
		return
	}
	t.Run("AcrossDaemons", func(t *testing.T) {
		b := newBacking(t, open)
		a, other := b.open("node-a"), b.open("node-b")
		got := make(chan []byte, 16)
		defer other.Bus.Subscribe("conformance", func(p []byte) { got <- p })()
		listening(t, got, "node-b's subscription")
		if err := a.Bus.Publish(ctx(t), "conformance", []byte("hello")); err != nil {
			t.Fatal(err)
		}
		if p := next(t, got, "node-a's publication on node-b"); p != "hello" {
			t.Fatalf("node-b received %q, want hello", p)
		}
		testwait.Eventually(t, suiteTimeout, "both daemons listed alive", func() bool {
			members, err := a.Members.List(ctx(t))
			alive := map[string]bool{}
			for _, m := range members {
				alive[m.ID] = m.Alive
			}
			return err == nil && alive["node-a"] && alive["node-b"]
		})
	})
}

func testSupervisors(t *testing.T, open Open, opts Options) {
	if !has(opts, "Supervisors") {
		return
	}
	b := newBacking(t, open)
	d := b.open("node-a")
	s := d.Supervisors
	if found, err := s.AnyAlive(ctx(t)); err != nil || found {
		t.Fatalf("AnyAlive with none registered = %v %v", found, err)
	}
	if err := s.Register(ctx(t), "session-1", map[string]any{"kinds": []string{"action.done"}}); err != nil {
		t.Fatal(err)
	}
	alive, err := s.Alive(ctx(t))
	if err != nil || len(alive) != 1 || alive[0].Node != "node-a" || alive[0].Session != "session-1" || !sameJSON(alive[0].Filter, []byte(`{"kinds":["action.done"]}`)) {
		t.Fatalf("Alive = %+v %v", alive, err)
	}
	if found, err := s.AnyAlive(ctx(t)); err != nil || !found {
		t.Fatalf("AnyAlive with one registered = %v %v", found, err)
	}
	if err := s.Unregister(ctx(t), "session-1"); err != nil {
		t.Fatal(err)
	}
	if found, err := s.AnyAlive(ctx(t)); err != nil || found {
		t.Fatalf("AnyAlive after the unregister = %v %v", found, err)
	}
	if err := s.Register(ctx(t), "session-2", nil); err != nil {
		t.Fatal(err)
	}
	d = b.restart(d)
	if found, err := d.Supervisors.AnyAlive(ctx(t)); err != nil || found {
		t.Fatalf("a daemon's subscriptions outlived its close: AnyAlive = %v %v", found, err)
	}
}
