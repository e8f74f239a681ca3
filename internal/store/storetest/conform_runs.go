package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/store"
)

// at is a time of the suite's runs, in microseconds: PostgreSQL keeps no
// finer, so a head read back compares equal.
func at(sec int) time.Time {
	return time.Date(2026, 3, 1, 12, 0, sec, 123456000, time.UTC)
}

// body is a record's JSON object.
func body(kind string, n int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"record":%q,"n":%d,"text":"line\n\"quoted\" é"}`, kind, n))
}

// started is a run's record 0 and ended its last, carrying what a head is
// made of, as package runs writes them (the file log reads a head's intent,
// start, end and outcome from them).
func started(h store.RunHead) store.RunRecord {
	b, _ := json.Marshal(map[string]any{"record": store.RunStarted, "run_id": h.RunID, "agent_id": h.AgentID, "intent": h.Intent, "started_at": h.StartedAt, "n": 0})
	return store.RunRecord{Kind: store.RunStarted, Body: b}
}

func ended(n int, e *store.RunEnd) store.RunRecord {
	b, _ := json.Marshal(map[string]any{"record": store.RunEnded, "status": e.Status, "ended_at": e.At, "outcome": e.Outcome, "n": n})
	return store.RunRecord{Kind: store.RunEnded, Body: b}
}

func turns(kinds ...string) func(store.RunHead) (store.RunBatch, error) {
	return func(h store.RunHead) (store.RunBatch, error) {
		var b store.RunBatch
		for i, k := range kinds {
			b.Records = append(b.Records, store.RunRecord{Kind: k, Body: body(k, h.Records+i)})
		}
		return b, nil
	}
}

// checkRecords compares a run's records with the bodies appended, as
// decoded objects: each record has exactly its body's fields.
func checkRecords(t *testing.T, got []json.RawMessage, want []json.RawMessage) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range want {
		var g, w map[string]any
		if err := json.Unmarshal(got[i], &g); err != nil {
			t.Fatalf("record %d is not a JSON object: %v: %s", i, err, got[i])
		}
		if err := json.Unmarshal(want[i], &w); err != nil {
			t.Fatal(err)
		}
		for k, v := range w {
			if !reflect.DeepEqual(g[k], v) {
				t.Fatalf("record %d: %s = %#v, want %#v (record %s)", i, k, g[k], v, got[i])
			}
		}
		if len(g) != len(w) {
			t.Fatalf("record %d is %s for the body %s: fields were added", i, got[i], want[i])
		}
	}
}

func records(t *testing.T, l store.RunLog, runID string, from, to int) []json.RawMessage {
	t.Helper()
	recs, err := l.Records(ctx(t), runID, from, to)
	if err != nil {
		t.Fatalf("Records(%s, %d, %d): %v", runID, from, to, err)
	}
	return recs
}

func head(t *testing.T, l store.RunLog, runID string) store.RunHead {
	t.Helper()
	h, err := l.Head(ctx(t), runID)
	if err != nil {
		t.Fatalf("Head(%s): %v", runID, err)
	}
	return h
}

// sameHead compares heads field by field, times by Equal.
func sameHead(a, b store.RunHead) bool {
	ended := (a.EndedAt == nil) == (b.EndedAt == nil) && (a.EndedAt == nil || a.EndedAt.Equal(*b.EndedAt))
	outcome := (a.Outcome == nil) == (b.Outcome == nil) && (a.Outcome == nil || sameJSON(a.Outcome, b.Outcome))
	return a.RunID == b.RunID && a.AgentID == b.AgentID && a.Intent == b.Intent && a.Owner == b.Owner && a.Node == b.Node &&
		a.Status == b.Status && a.StartedAt.Equal(b.StartedAt) && ended && outcome && a.Turns == b.Turns && a.Records == b.Records
}

func testRuns(t *testing.T, open Open, opts Options) {
	if !has(opts, "Runs") {
		return
	}
	t.Run("StartAppendEndRestart", func(t *testing.T) {
		b := newBacking(t, open)
		d := b.open("node-a")
		l := d.Runs
		start := store.RunHead{RunID: "run-1", AgentID: "agent-1", Intent: "tidy up", Owner: "conn-1", Node: d.Node, StartedAt: at(0)}
		cur, created, err := l.Start(ctx(t), start, started(start))
		if err != nil || !created {
			t.Fatalf("Start = created %v, %v", created, err)
		}
		want := start
		want.Status, want.Records = store.RunInProgress, 1
		if !sameHead(cur, want) || !sameHead(head(t, l, "run-1"), want) {
			t.Fatalf("the new run's head: Start gave %+v, Head gives %+v; want %+v", cur, head(t, l, "run-1"), want)
		}
		appended := []json.RawMessage{started(start).Body}

		var before store.RunHead
		h, err := l.Append(ctx(t), "run-1", func(h store.RunHead) (store.RunBatch, error) {
			before = h
			return turns(store.RunTurn, "note", store.RunTurn)(h)
		})
		if err != nil {
			t.Fatal(err)
		}
		if !sameHead(before, want) {
			t.Fatalf("next was handed %+v, want the head before the batch %+v", before, want)
		}
		want.Turns, want.Records = 2, 4
		if !sameHead(h, want) {
			t.Fatalf("the head after a batch: %+v, want %+v", h, want)
		}
		appended = append(appended, body(store.RunTurn, 1), body("note", 2), body(store.RunTurn, 3))
		checkRecords(t, records(t, l, "run-1", 0, -1), appended)
		checkRecords(t, records(t, l, "run-1", 1, 3), appended[1:3])
		checkRecords(t, records(t, l, "run-1", 3, 99), appended[3:])
		if recs := records(t, l, "run-1", 4, -1); len(recs) != 0 {
			t.Fatalf("records past the end: %d", len(recs))
		}

		// A batch that fails appends nothing, whatever failed.
		refused := errors.New("refused by next")
		if _, err := l.Append(ctx(t), "run-1", func(store.RunHead) (store.RunBatch, error) { return store.RunBatch{}, refused }); !errors.Is(err, refused) {
			t.Fatalf("the error of next came back as %v", err)
		}
		bad := func(store.RunHead) (store.RunBatch, error) {
			return store.RunBatch{Records: []store.RunRecord{{Kind: store.RunTurn, Body: body(store.RunTurn, 4)}, {Kind: store.RunTurn, Body: json.RawMessage(`[1]`)}}}, nil
		}
		if _, err := l.Append(ctx(t), "run-1", bad); err == nil {
			t.Fatal("a batch with a record that is not an object was appended")
		}
		if h := head(t, l, "run-1"); !sameHead(h, want) {
			t.Fatalf("after refused batches the head is %+v, want %+v", h, want)
		}
		checkRecords(t, records(t, l, "run-1", 0, -1), appended)

		// Start again: the same agent takes its run over; another agent's
		// is not found.
		again := start
		again.Owner, again.Intent, again.StartedAt = "conn-2", "another intent", at(5)
		cur, created, err = l.Start(ctx(t), again, started(again))
		want.Owner = "conn-2"
		if err != nil || created || !sameHead(cur, want) {
			t.Fatalf("Start of an existing run = %+v created %v err %v; want %+v", cur, created, err, want)
		}
		intruder := start
		intruder.AgentID = "agent-2"
		if _, _, err := l.Start(ctx(t), intruder, started(intruder)); !errors.Is(err, store.ErrRunNotFound) {
			t.Fatalf("Start of another agent's run: %v, want ErrRunNotFound", err)
		}

		// The end.
		end := &store.RunEnd{Status: store.RunCompleted, At: at(9), Outcome: json.RawMessage(`{"summary":"done"}`)}
		h, err = l.Append(ctx(t), "run-1", func(h store.RunHead) (store.RunBatch, error) {
			return store.RunBatch{Records: []store.RunRecord{ended(h.Records, end)}, End: end}, nil
		})
		endedAt := at(9)
		want.Status, want.EndedAt, want.Outcome, want.Records = store.RunCompleted, &endedAt, end.Outcome, 5
		if err != nil || !sameHead(h, want) || !sameHead(head(t, l, "run-1"), want) {
			t.Fatalf("the end: %+v %v; Head %+v; want %+v", h, err, head(t, l, "run-1"), want)
		}
		appended = append(appended, ended(4, end).Body)
		called := false
		if _, err := l.Append(ctx(t), "run-1", func(h store.RunHead) (store.RunBatch, error) {
			called = true
			return turns(store.RunTurn)(h)
		}); !errors.Is(err, store.ErrRunEnded) || called {
			t.Fatalf("an append to an ended run: %v (next called: %v), want ErrRunEnded without next", err, called)
		}

		// Unknown runs.
		if _, err := l.Head(ctx(t), "run-x"); !errors.Is(err, store.ErrRunNotFound) {
			t.Fatalf("Head of an unknown run: %v", err)
		}
		if _, err := l.Records(ctx(t), "run-x", 0, -1); !errors.Is(err, store.ErrRunNotFound) {
			t.Fatalf("Records of an unknown run: %v", err)
		}
		if _, err := l.Append(ctx(t), "run-x", turns(store.RunTurn)); !errors.Is(err, store.ErrRunNotFound) {
			t.Fatalf("Append to an unknown run: %v", err)
		}

		// Two more runs, one left in progress; List is newest first.
		for i, id := range []string{"run-2", "run-3"} {
			h := store.RunHead{RunID: id, AgentID: "agent-1", Intent: id, Owner: "conn-3", Node: d.Node, StartedAt: at(10 + i)}
			if _, _, err := l.Start(ctx(t), h, started(h)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := l.Append(ctx(t), "run-2", func(h store.RunHead) (store.RunBatch, error) {
			e := &store.RunEnd{Status: store.RunIncomplete, At: at(20)}
			return store.RunBatch{Records: []store.RunRecord{ended(h.Records, e)}, End: e}, nil
		}); err != nil {
			t.Fatal(err)
		}
		listed := func(l store.RunLog) []string {
			t.Helper()
			heads, err := l.List(ctx(t), "agent-1")
			if err != nil {
				t.Fatal(err)
			}
			ids := []string{}
			for _, h := range heads {
				ids = append(ids, h.RunID)
			}
			return ids
		}
		if ids := listed(l); !reflect.DeepEqual(ids, []string{"run-3", "run-2", "run-1"}) {
			t.Fatalf("List = %v, want newest first", ids)
		}
		if heads, err := l.List(ctx(t), "agent-none"); err != nil || heads == nil || len(heads) != 0 {
			t.Fatalf("List of an agent without runs = %#v %v, want an empty list", heads, err)
		}

		// A restart: the runs are there; the one left in progress is
		// stranded.
		d = b.restart(d)
		l = d.Runs
		if ids := listed(l); !reflect.DeepEqual(ids, []string{"run-3", "run-2", "run-1"}) {
			t.Fatalf("after a restart List = %v", ids)
		}
		if h := head(t, l, "run-1"); !sameHead(h, want) {
			t.Fatalf("after a restart run-1's head is %+v, want %+v", h, want)
		}
		checkRecords(t, records(t, l, "run-1", 0, -1), appended)
		stranded, err := l.Stranded(ctx(t))
		if err != nil || len(stranded) != 1 || stranded[0].RunID != "run-3" || stranded[0].Status != store.RunInProgress {
			t.Fatalf("Stranded after a restart = %+v %v; want run-3 alone", stranded, err)
		}
		if _, err := l.Append(ctx(t), "run-3", turns(store.RunTurn)); err != nil {
			t.Fatalf("an append to a run in progress after a restart: %v", err)
		}
	})

	// The node of a run whose Start names none.
	t.Run("NodeOfARun", func(t *testing.T) {
		d := newBacking(t, open).open("node-a")
		h := store.RunHead{RunID: "run-1", AgentID: "agent-1", Owner: "conn-1", StartedAt: at(0)}
		cur, _, err := d.Runs.Start(ctx(t), h, started(h))
		if err != nil {
			t.Fatal(err)
		}
		want := d.Node
		if cur.Node != want || head(t, d.Runs, "run-1").Node != want {
			t.Fatalf("the run's node is %q (Head: %q), want %q", cur.Node, head(t, d.Runs, "run-1").Node, want)
		}
	})

	// Appends to one run that race: each is whole and in order, so the
	// seqs stay contiguous and each record is where next said it would be;
	// Starts of one new run that race create it once.
	t.Run("RacingAppendsAndStarts", func(t *testing.T) {
		d := newBacking(t, open).open("node-a")
		l := d.Runs
		created := make([]bool, racers)
		errs := make([]error, racers)
		race(racers, func(i int) {
			h := store.RunHead{RunID: "run-1", AgentID: "agent-1", Owner: fmt.Sprintf("conn-%d", i), Node: d.Node, StartedAt: at(0)}
			_, created[i], errs[i] = l.Start(ctx(t), h, started(h))
		})
		n := 0
		for i := range racers {
			if errs[i] != nil {
				t.Fatalf("start %d: %v", i, errs[i])
			}
			if created[i] {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%d racing Starts created the run, want 1", n)
		}
		race(racers, func(i int) {
			_, errs[i] = l.Append(ctx(t), "run-1", turns(store.RunTurn, store.RunTurn))
		})
		for i, err := range errs {
			if err != nil {
				t.Fatalf("append %d: %v", i, err)
			}
		}
		h := head(t, l, "run-1")
		if h.Records != 1+2*racers || h.Turns != 2*racers {
			t.Fatalf("after %d racing appends of 2 turns: %d records, %d turns", racers, h.Records, h.Turns)
		}
		want := []json.RawMessage{started(store.RunHead{RunID: "run-1", AgentID: "agent-1", StartedAt: at(0)}).Body}
		for i := 1; i < h.Records; i++ {
			want = append(want, body(store.RunTurn, i))
		}
		checkRecords(t, records(t, l, "run-1", 0, -1), want)
	})

	if !opts.Shared {
		return
	}
	// A run started on one daemon is read and appended to on another.
	t.Run("AcrossDaemons", func(t *testing.T) {
		b := newBacking(t, open)
		a, other := b.open("node-a").Runs, b.open("node-b").Runs
		h := store.RunHead{RunID: "run-1", AgentID: "agent-1", Owner: "conn-1", StartedAt: at(0)}
		if _, _, err := a.Start(ctx(t), h, started(h)); err != nil {
			t.Fatal(err)
		}
		got, err := other.Append(ctx(t), "run-1", turns(store.RunTurn))
		if err != nil || got.Records != 2 || got.Node != "node-a" {
			t.Fatalf("node-b's append to node-a's run = %+v %v", got, err)
		}
		h.Owner = "conn-b"
		cur, created, err := other.Start(ctx(t), h, started(h))
		if err != nil || created || cur.Node != "node-b" || cur.Owner != "conn-b" {
			t.Fatalf("node-b's Start of node-a's run = %+v created %v err %v; want it taken over by node-b", cur, created, err)
		}
		checkRecords(t, records(t, a, "run-1", 0, -1), []json.RawMessage{started(store.RunHead{RunID: "run-1", AgentID: "agent-1", StartedAt: at(0)}).Body, body(store.RunTurn, 1)})
	})
}
