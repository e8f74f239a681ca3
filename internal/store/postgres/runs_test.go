package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/runs"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/file"
	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
	"github.com/parslee-ai/car-server/internal/testwait"
)

// openRuns is the run traces of db, as a daemon opens them, closed when
// the test ends (before db).
func openRuns(t *testing.T, db *DB, grace time.Duration) *runs.Store {
	t.Helper()
	st, _, err := runs.OpenLog(ctxT(t), db.Store().Runs, runs.Options{Grace: grace})
	if err != nil {
		t.Fatalf("open the run traces of %s: %v", db.cfg.Node, err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close the run traces of %s: %v", db.cfg.Node, err)
		}
	})
	return st
}

func prompts(n int, prefix string) []runs.Turn {
	out := make([]runs.Turn, n)
	for i := range out {
		out[i] = runs.Turn{Prompt: fmt.Sprintf("%s-%d", prefix, i)}
	}
	return out
}

// A run started and appended to on daemon a is listed and traced on
// daemon b; b's appends to it land after a's, its turn indexes
// contiguous; a subscription on b waits for the run to end on a.
func TestRunsAreReadOnEveryDaemon(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	da, db := openNode(t, url, "a"), openNode(t, url, "b")
	a, b := openRuns(t, da, time.Minute), openRuns(t, db, time.Minute)
	ctx := ctxT(t)

	id, existing, err := a.Start(ctx, runs.Start{RunID: "run-1", AgentID: "alice", Intent: "fix the build", Owner: "conn-a"})
	if err != nil || existing || id != "run-1" {
		t.Fatalf("start on a: %q %v %v", id, existing, err)
	}
	if base, err := a.Append(ctx, id, prompts(3, "a")); err != nil || base != 0 {
		t.Fatalf("append on a: %d %v", base, err)
	}
	list, err := b.List(ctx, "alice")
	if err != nil || len(list) != 1 || list[0].RunID != id || list[0].TurnCount != 3 || list[0].Status != runs.StatusInProgress || list[0].Intent != "fix the build" {
		t.Fatalf("b lists %+v %v", list, err)
	}
	if agent, owner, err := b.Info(ctx, id); err != nil || agent != "alice" || owner != "conn-a" {
		t.Fatalf("b's info: %q %q %v", agent, owner, err)
	}
	recs, err := b.Trace(ctx, id, 0)
	if err != nil || len(recs) != 4 || recs[0].Record != runs.KindStarted || recs[0].AgentID != "alice" || recs[3].Turn.Prompt != "a-2" {
		t.Fatalf("b traces %+v %v", recs, err)
	}
	var elsewhere *runs.ElsewhereError
	if _, err := b.Subscribe(ctx, id, "sub-b", func(runs.Event) {}); !errors.As(err, &elsewhere) || elsewhere.Node != "a" {
		t.Fatalf("a subscription on b to a's run in progress: %v, want it refused naming a", err)
	}

	// The agent's turns sent to b land after a's.
	if base, err := b.Append(ctx, id, prompts(2, "b")); err != nil || base != 3 {
		t.Fatalf("append on b: %d %v", base, err)
	}
	if base, err := a.Append(ctx, id, prompts(1, "a2")); err != nil || base != 5 {
		t.Fatalf("a's next append: %d %v, want base 5", base, err)
	}
	if err := a.Complete(ctx, id, json.RawMessage(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	snap, err := b.Subscribe(ctx, id, "sub-b", func(runs.Event) {})
	if err != nil || snap.Status != runs.StatusCompleted || snap.Cursor != 6 || len(snap.TurnsSoFar) != 6 {
		t.Fatalf("b's snapshot of the ended run: %+v %v", snap, err)
	}
	for i, r := range snap.TurnsSoFar {
		if r.Turn.Index != i {
			t.Fatalf("turn %d carries index %d", i, r.Turn.Index)
		}
	}
	if recs, err := b.Trace(ctx, id, 7); err != nil || len(recs) != 1 || recs[0].Record != runs.KindEnded || string(recs[0].Outcome) != `{"ok":true}` {
		t.Fatalf("the end read on b: %+v %v", recs, err)
	}
	if err := b.Complete(ctx, id, nil); err == nil || errors.Is(err, runs.ErrNotFound) {
		t.Fatalf("a second complete, on b: %v, want an already-ended error", err)
	}
	if _, err := b.Append(ctx, id, prompts(1, "late")); !isDrop(err, runs.DropRunTerminal) {
		t.Fatalf("an append after the end: %v", err)
	}
	if _, err := b.Trace(ctx, "no-such-run", 0); !errors.Is(err, runs.ErrNotFound) {
		t.Fatalf("an unknown run: %v", err)
	}
}

func isDrop(err error, reason string) bool {
	var d *runs.DropError
	return errors.As(err, &d) && d.Reason == reason
}

// Appends to one run from both daemons at once keep its seqs and its turn
// indexes contiguous: none lost, none repeated.
func TestConcurrentAppendsKeepContiguousSeqs(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	da, db := openNode(t, url, "a"), openNode(t, url, "b")
	stores := []*runs.Store{openRuns(t, da, time.Minute), openRuns(t, db, time.Minute)}
	ctx := ctxT(t)
	id, _, err := stores[0].Start(ctx, runs.Start{RunID: "busy", AgentID: "alice", Intent: "i", Owner: "c"})
	if err != nil {
		t.Fatal(err)
	}
	const writers, batches = 6, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*batches)
	total := 0
	for w := range writers {
		for b := range batches {
			total += 1 + (w+b)%3
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				if _, err := stores[w%2].Append(ctx, id, prompts(1+(w+b)%3, fmt.Sprint("w", w))); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	conn := sqlConn(t, url)
	var n, maxSeq, records, turns int
	if err := conn.QueryRow(ctx, "SELECT count(*), max(seq) FROM car_run_records WHERE run_id = $1", id).Scan(&n, &maxSeq); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, "SELECT records, turns FROM car_runs WHERE run_id = $1", id).Scan(&records, &turns); err != nil {
		t.Fatal(err)
	}
	if n != total+1 || maxSeq != total || records != total+1 || turns != total {
		t.Fatalf("%d turns appended: %d records up to seq %d, head says %d records and %d turns", total, n, maxSeq, records, turns)
	}
	recs, err := stores[1].Trace(ctx, id, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if r.Turn == nil || r.Turn.Index != i {
			t.Fatalf("record %d is not turn %d: %+v", i+1, i, r)
		}
	}
}

// A daemon that restarts marks incomplete its own runs left in progress,
// and not the other daemons'.
func TestStrandedRunsAreThisDaemonsOnly(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	ctx := ctxT(t)
	da, db := openNode(t, url, "a"), openNode(t, url, "b")
	a := openRuns(t, da, time.Minute)
	b := openRuns(t, db, time.Minute)
	if _, _, err := a.Start(ctx, runs.Start{RunID: "ra", AgentID: "alice", Intent: "i", Owner: "c1"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Start(ctx, runs.Start{RunID: "rb", AgentID: "alice", Intent: "i", Owner: "c2"}); err != nil {
		t.Fatal(err)
	}
	// Daemon a comes back (its store opened again under its id).
	again := openNode(t, url, "a")
	_, marked, err := runs.OpenLog(ctx, again.Store().Runs, runs.Options{})
	if err != nil || marked != 1 {
		t.Fatalf("a's restart marked %d runs incomplete (%v), want its 1", marked, err)
	}
	list, err := b.List(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range list {
		got[s.RunID] = s.Status
	}
	if got["ra"] != runs.StatusIncomplete || got["rb"] != runs.StatusInProgress {
		t.Fatalf("after a's restart: %v, want ra incomplete and b's rb still in progress", got)
	}
	recs, err := b.Trace(ctx, "ra", 0)
	if err != nil || len(recs) != 2 || recs[1].Record != runs.KindEnded || recs[1].Status != runs.StatusIncomplete {
		t.Fatalf("ra's trace: %+v %v", recs, err)
	}
}

// A run started again on another daemon (the same key, the same agent) is
// taken over there: the first daemon's incomplete marker for the
// connection that went away leaves it alone. Another agent's key is
// refused.
func TestARunStartedAgainElsewhereIsTakenOver(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	ctx := ctxT(t)
	da, db := openNode(t, url, "a"), openNode(t, url, "b")
	a, b := openRuns(t, da, time.Millisecond), openRuns(t, db, time.Minute)
	if _, _, err := a.Start(ctx, runs.Start{RunID: "k", AgentID: "alice", Intent: "i", Owner: "c1"}); err != nil {
		t.Fatal(err)
	}
	id, existing, err := b.Start(ctx, runs.Start{RunID: "k", AgentID: "alice", Intent: "i", Owner: "c2"})
	if err != nil || !existing || id != "k" {
		t.Fatalf("started again on b: %q %v %v", id, existing, err)
	}
	if _, _, err := b.Start(ctx, runs.Start{RunID: "k", AgentID: "bob", Intent: "i", Owner: "c3"}); !errors.Is(err, runs.ErrNotFound) {
		t.Fatalf("bob starting alice's key: %v", err)
	}
	// c1 goes away on a; its marker, when it runs, finds the run taken
	// over and lets it go: a no longer holds it live.
	a.Orphan("k", "c1")
	testwait.Eventually(t, eventualLimit, "a's marker to have run", func() bool {
		_, err := a.Subscribe(ctx, "k", "probe", func(runs.Event) {})
		a.Unsubscribe("k", "probe")
		var elsewhere *runs.ElsewhereError
		return errors.As(err, &elsewhere) && elsewhere.Node == "b"
	})
	h, err := db.Store().Runs.Head(ctx, "k")
	if err != nil || h.Status != runs.StatusInProgress || h.Owner != "c2" || h.Node != "b" {
		t.Fatalf("the run taken over, after a's marker: %+v %v", h, err)
	}
	if _, err := b.Append(ctx, "k", prompts(1, "b")); err != nil {
		t.Fatalf("an append on b after a's marker: %v", err)
	}
}

// While the database is down, every run operation fails saying the store
// is unavailable, and nothing is acknowledged.
func TestRunsUnavailable(t *testing.T) {
	t.Parallel()
	srv := pgtest.NewServer(t)
	url := srv.NewDatabase(t)
	d := openNode(t, url, "a")
	st := openRuns(t, d, time.Minute)
	ctx := ctxT(t)
	if _, _, err := st.Start(ctx, runs.Start{RunID: "r", AgentID: "alice", Intent: "i", Owner: "c"}); err != nil {
		t.Fatal(err)
	}
	srv.Stop(t)
	log := d.Store().Runs
	checks := map[string]error{}
	_, _, checks["start"] = st.Start(ctx, runs.Start{RunID: "r2", AgentID: "alice", Intent: "i", Owner: "c"})
	_, checks["append"] = st.Append(ctx, "r", prompts(1, "x"))
	checks["complete"] = st.Complete(ctx, "r", nil)
	_, checks["list"] = st.List(ctx, "alice")
	_, checks["trace"] = st.Trace(ctx, "r", 0)
	_, _, checks["info of a run not live here"] = st.Info(ctx, "elsewhere")
	_, checks["records"] = log.Records(ctx, "r", 0, -1)
	_, checks["stranded"] = log.Stranded(ctx)
	for what, err := range checks {
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s with the database down: %v, want ErrUnavailable", what, err)
		}
	}
	srv.Start(t)
	testwait.Eventually(t, eventualLimit, "the database to answer again", func() bool {
		_, err := st.Append(ctx, "r", prompts(1, "back"))
		return err == nil
	})
	recs, err := st.Trace(ctx, "r", 0)
	if err != nil || len(recs) != 2 {
		t.Fatalf("after the outage: %d records (%v), want the started record and the one turn acknowledged", len(recs), err)
	}
}

// The log refuses what PostgreSQL cannot keep, saying so, and a record
// that is not an object.
func TestRunLogRefusesWhatItCannotKeep(t *testing.T) {
	t.Parallel()
	d := openNode(t, pgtest.URL(t), "a")
	log := d.Store().Runs
	ctx := ctxT(t)
	h := store.RunHead{RunID: "r", AgentID: "x\x00y", Owner: "c", StartedAt: time.Now()}
	if _, _, err := log.Start(ctx, h, store.RunRecord{Kind: store.RunStarted, Body: json.RawMessage(`{}`)}); err == nil {
		t.Fatal("an agent id with a NUL was started")
	}
	h.AgentID = "alice"
	if _, _, err := log.Start(ctx, h, store.RunRecord{Kind: store.RunStarted, Body: json.RawMessage(`[1]`)}); err == nil {
		t.Fatal("a record that is not an object was started")
	}
	if _, created, err := log.Start(ctx, h, store.RunRecord{Kind: store.RunStarted, Body: json.RawMessage(`{"record":"started"}`)}); err != nil || !created {
		t.Fatal(err)
	}
	_, err := log.Append(ctx, "r", func(store.RunHead) (store.RunBatch, error) {
		return store.RunBatch{Records: []store.RunRecord{{Kind: store.RunTurn, Body: json.RawMessage(`{"a":1}`)}, {Kind: store.RunTurn, Body: json.RawMessage(`nope`)}}}, nil
	})
	if err == nil {
		t.Fatal("a batch with a record that is not JSON was appended")
	}
	if got, err := log.Records(ctx, "r", 0, -1); err != nil || len(got) != 1 {
		t.Fatalf("a refused batch left %d records (%v), want the started one", len(got), err)
	}
}

// BenchmarkRunAppend is one record_turns of one turn, acknowledged, on the
// file store's run log and on this one, side by side.
func BenchmarkRunAppend(b *testing.B) {
	ctx := context.Background()
	bench := func(b *testing.B, st *runs.Store) {
		run := ""
		for i := range b.N {
			if i%runs.MaxTurns == 0 { // a fresh run before this one is full
				b.StopTimer()
				var err error
				if run, _, err = st.Start(ctx, runs.Start{AgentID: "alice", Intent: "i", Owner: "c"}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			if _, err := st.Append(ctx, run, prompts(1, "p")); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("file", func(b *testing.B) {
		st, _, err := file.OpenRunStore(b.TempDir(), runs.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		bench(b, st)
	})
	b.Run("postgres", func(b *testing.B) {
		db, err := Open(ctx, Config{URL: pgtest.URL(b), Node: "a"})
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		st, _, err := runs.OpenLog(ctx, db.Store().Runs, runs.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		bench(b, st)
	})
}
