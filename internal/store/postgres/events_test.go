package postgres

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
	"github.com/parslee-ai/car-server/internal/testwait"
)

// testHash stands for the engine's event hash: it hashes what the body says
// (seq, kind, data and the link), never the stored columns.
func testHash(body json.RawMessage) (string, error) {
	var e struct {
		Seq      uint64         `json:"seq"`
		Kind     string         `json:"kind"`
		Data     map[string]any `json:"data"`
		PrevHash string         `json:"prev_hash"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		return "", err
	}
	b, _ := json.Marshal(e)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// chain makes a daemon's records, hash-chained as the engine would.
type chain struct {
	node string
	seq  uint64
	prev string
}

func (c *chain) next(kind, proposal string) store.EventRecord {
	c.seq++
	body, _ := json.Marshal(map[string]any{"seq": c.seq, "kind": kind, "proposal_id": proposal,
		"data": map[string]any{"n": c.seq, "who": "<" + c.node + ">"}, "prev_hash": c.prev})
	h, _ := testHash(body)
	r := store.EventRecord{Node: c.node, Seq: c.seq, At: time.Date(2030, 1, 1, 0, 0, int(c.seq), 0, time.UTC),
		Kind: kind, ProposalID: proposal, Hash: h, PrevHash: c.prev, Body: body}
	c.prev = h
	return r
}

func (c *chain) append(db *DB, n int) []store.EventRecord {
	var out []store.EventRecord
	for range n {
		r := c.next("action_succeeded", "p1")
		db.events.Append(r)
		out = append(out, r)
	}
	return out
}

func count(t *testing.T, db *DB) int {
	t.Helper()
	n, err := db.events.Count(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// seqsByPos lists node:seq of every stored record in position order.
func seqsByPos(t *testing.T, db *DB) []string {
	t.Helper()
	recs, _, err := db.events.Since(ctxT(t), 0, 10000, "")
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = fmt.Sprintf("%s:%d", r.Node, r.Seq)
	}
	return out
}

func wantSeqs(node string, from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("%s:%d", node, i))
	}
	return out
}

// What accumulates while a batch is written goes in the next batch.
func TestEventsWrittenInBatches(t *testing.T) {
	t.Parallel()
	a := openNode(t, pgtest.URL(t), "a")
	entered, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	a.events.beforeInsert = func([]store.EventRecord) {
		if first.CompareAndSwap(false, true) {
			close(entered)
			<-release
		}
	}
	c := &chain{node: "a"}
	c.append(a, 1)
	<-entered // the writer holds record 1
	c.append(a, 499)
	close(release)
	// The writer counts a batch after its insert commits: wait for the
	// count, not for the rows.
	testwait.Eventually(t, eventualLimit, "500 records written", func() bool { return a.EventStats().Written >= 500 })
	if st := a.EventStats(); st.Batches != 2 || st.Written != 500 || st.Dropped != 0 {
		t.Fatalf("stats %+v, want 2 batches of 500 records in all", st)
	}
	if n := count(t, a); n != 500 {
		t.Fatalf("%d records in the database, want 500", n)
	}
	if got := seqsByPos(t, a); strings.Join(got, ",") != strings.Join(wantSeqs("a", 1, 500), ",") {
		t.Fatalf("positions do not follow the append order: %v", got)
	}
}

// A written batch is announced on store.TopicEvents with its writer's id,
// so the other daemons' followers read it without waiting for their poll.
func TestEventsBatchAnnounced(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a, b := openNode(t, url, "a"), openNode(t, url, "b")
	heard, listening := make(chan string, 16), make(chan struct{}, 16)
	stop := b.bus.Subscribe(store.TopicEvents, func(p []byte) {
		if p == nil { // the topic is listened to (or listened to again)
			listening <- struct{}{}
			return
		}
		heard <- string(p)
	})
	defer stop()
	<-listening
	(&chain{node: "a"}).append(a, 3)
	select {
	case who := <-heard:
		if who != "a" {
			t.Fatalf("announcement names %q, want the writer a", who)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no announcement of a's batch reached b")
	}
	if n := count(t, a); n != 3 {
		t.Fatalf("%d records readable when the batch was announced, want 3", n)
	}
}

// While the database is down, events go to the spool file; once it is back
// they are written in order before anything newer, and the spool is emptied.
func TestEventsSpoolWhileDatabaseDown(t *testing.T) {
	t.Parallel()
	srv := pgtest.NewServer(t)
	url := srv.NewDatabase(t)
	spool := filepath.Join(t.TempDir(), "events-spool.jsonl")
	a := openNode(t, url, "a", func(c *Config) { c.SpoolPath = spool; c.ConnectTimeout = time.Second })
	c := &chain{node: "a"}
	c.append(a, 10)
	// Flushed, as before a reply: a batch inserted but not known flushed
	// when the database goes would be spooled again (see
	// TestEventsNotFlushedAreSentAgain).
	if err := a.events.Flush(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if n := count(t, a); n != 10 {
		t.Fatalf("%d records in the database after Flush, want 10", n)
	}
	srv.Stop(t)
	c.append(a, 50)
	testwait.Eventually(t, eventualLimit, "50 records spooled", func() bool { return a.EventStats().Spooled == 50 })
	if lines := spoolLines(t, spool); lines != 50 {
		t.Fatalf("the spool file holds %d lines, want 50", lines)
	}
	srv.Start(t)
	c.append(a, 20) // behind the spool, whatever the writer is doing
	testwait.Eventually(t, eventualLimit, "all 80 in the database", func() bool {
		n, err := a.events.Count(ctxT(t))
		return err == nil && n == 80
	})
	if got := seqsByPos(t, a); strings.Join(got, ",") != strings.Join(wantSeqs("a", 1, 80), ",") {
		t.Fatalf("positions do not follow the node's seq: %v", got)
	}
	testwait.Eventually(t, eventualLimit, "the spool emptied", func() bool { return a.EventStats().SpoolBytes == 0 })
	if fi, err := os.Stat(spool); err != nil || fi.Size() != 0 {
		t.Fatalf("the drained spool file is not empty: %v %v", fi, err)
	}
	if st := a.EventStats(); st.Dropped != 0 {
		t.Fatalf("events dropped: %+v", st)
	}
}

func spoolLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// Records spooled when the daemon stops are written by its next run.
func TestEventsSpoolSurvivesRestart(t *testing.T) {
	t.Parallel()
	srv := pgtest.NewServer(t)
	url := srv.NewDatabase(t)
	spool := filepath.Join(t.TempDir(), "events-spool.jsonl")
	set := func(c *Config) { c.SpoolPath = spool; c.ConnectTimeout = time.Second }
	a := openNode(t, url, "a", set)
	c := &chain{node: "a"}
	c.append(a, 5)
	// Written, not only visible: a commit whose reply the stop cuts off is
	// ambiguous to the writer, which then spools the batch again.
	testwait.Eventually(t, eventualLimit, "5 written to the database", func() bool { return a.EventStats().Written == 5 })
	if err := a.events.Flush(ctxT(t)); err != nil { // and flushed: else they are spooled again
		t.Fatal(err)
	}
	srv.Stop(t)
	c.append(a, 7)
	if err := a.Close(); err != nil { // flushes the queue to the spool
		t.Fatal(err)
	}
	if lines := spoolLines(t, spool); lines != 7 {
		t.Fatalf("after Close the spool holds %d lines, want 7", lines)
	}
	srv.Start(t)
	a2 := openNode(t, url, "a", set)
	seq, hash, err := a2.events.LastOf(ctxT(t), "a")
	if err != nil || seq != 12 || hash != c.prev {
		t.Fatalf("LastOf after a restart = %d %q %v, want seq 12 and its hash (from the spool or the database)", seq, hash, err)
	}
	testwait.Eventually(t, eventualLimit, "12 in the database", func() bool { return count(t, a2) == 12 })
	if got := seqsByPos(t, a2); strings.Join(got, ",") != strings.Join(wantSeqs("a", 1, 12), ",") {
		t.Fatalf("positions do not follow the node's seq: %v", got)
	}
}

// Past its bound the spool refuses events, counts them and says so.
func TestEventsSpoolBound(t *testing.T) {
	t.Parallel()
	srv := pgtest.NewServer(t)
	url := srv.NewDatabase(t)
	spool := filepath.Join(t.TempDir(), "events-spool.jsonl")
	prev := strings.Repeat("0", 64)
	c := &chain{node: "a", seq: 9, prev: prev} // seq 10 to 39: lines of one length
	line := int64(len(encodeSpoolLine(ptr(c.next("action_succeeded", "p1")))))
	c = &chain{node: "a", seq: 9, prev: prev}
	core, logs := observer.New(zap.ErrorLevel)
	a := openNode(t, url, "a", func(cfg *Config) {
		cfg.SpoolPath, cfg.SpoolMaxBytes, cfg.ConnectTimeout, cfg.Log = spool, 10*line, time.Second, zap.New(core)
	})
	srv.Stop(t)
	c.append(a, 30)
	testwait.Eventually(t, eventualLimit, "30 records spooled or refused", func() bool {
		st := a.EventStats()
		return st.Spooled+st.Dropped == 30
	})
	if st := a.EventStats(); st.Spooled != 10 || st.Dropped != 20 || st.SpoolBytes != 10*line {
		t.Fatalf("stats %+v, want 10 spooled in %d bytes and 20 refused", st, 10*line)
	}
	if logs.FilterMessageSnippet("refused").Len() == 0 {
		t.Fatal("refused events were not logged")
	}
	srv.Start(t)
	testwait.Eventually(t, eventualLimit, "the spooled 10 in the database", func() bool {
		n, err := a.events.Count(ctxT(t))
		return err == nil && n == 10
	})
	if got := seqsByPos(t, a); strings.Join(got, ",") != strings.Join(wantSeqs("a", 10, 19), ",") {
		t.Fatalf("stored %v, want the first 10", got)
	}
}

func ptr[T any](v T) *T { return &v }

// A batch whose commit was ambiguous is spooled and sent again; the records
// already in are skipped, none is stored twice.
func TestEventsResentBatchStoredOnce(t *testing.T) {
	t.Parallel()
	a := openNode(t, pgtest.URL(t), "a")
	var failed atomic.Bool
	a.events.afterInsert = func() error {
		if failed.CompareAndSwap(false, true) {
			return io.ErrUnexpectedEOF // the commit went through, its answer was lost
		}
		return nil
	}
	c := &chain{node: "a"}
	sent := c.append(a, 20)
	testwait.Eventually(t, eventualLimit, "the spool drained", func() bool {
		st := a.EventStats()
		return st.Spooled > 0 && st.SpoolBytes == 0 && st.Queued == 0
	})
	for _, r := range sent[:5] { // and a caller's own duplicates
		a.events.Append(r)
	}
	c.append(a, 1)
	testwait.Eventually(t, eventualLimit, "record 21 in the database", func() bool {
		last, _, err := a.events.LastOf(ctxT(t), "a")
		return err == nil && last == 21 && count(t, a) >= 21
	})
	if got := seqsByPos(t, a); strings.Join(got, ",") != strings.Join(wantSeqs("a", 1, 21), ",") {
		t.Fatalf("stored %v, want each record once", got)
	}
}

// Two daemons write at once while a reader follows Since: positions become
// visible in order, so the reader sees every record exactly once.
func TestEventsSinceContiguousAcrossWriters(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a, b := openNode(t, url, "a"), openNode(t, url, "b")
	const each = 2000
	var wg sync.WaitGroup
	for _, db := range []*DB{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &chain{node: db.cfg.Node}
			deadline := time.Now().Add(60 * time.Second)
			for i := 1; i <= each/10; i++ {
				c.append(db, 10)
				// Many small batches: the next ten once these are in.
				for db.EventStats().Written < uint64(10*i) {
					if time.Now().After(deadline) {
						t.Errorf("writer %s: batch %d not written", db.cfg.Node, i)
						return
					}
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	ctx := ctxT(t)
	seen := make(map[string]bool)
	var cursor, last int64
	next := map[string]uint64{"a": 1, "b": 1}
	deadline := time.Now().Add(60 * time.Second)
	for len(seen) < 2*each {
		if time.Now().After(deadline) {
			t.Fatalf("the reader saw %d of %d records", len(seen), 2*each)
		}
		recs, cur, err := a.events.Since(ctx, cursor, 100, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Pos <= last {
				t.Fatalf("position %d after %d", r.Pos, last)
			}
			last = r.Pos
			if r.Seq != next[r.Node] {
				t.Fatalf("%s:%d read where %s:%d was due: a record was skipped", r.Node, r.Seq, r.Node, next[r.Node])
			}
			next[r.Node]++
			seen[fmt.Sprintf("%s:%d", r.Node, r.Seq)] = true
		}
		cursor = cur
	}
	wg.Wait()
	var lo, hi int64
	if err := a.pool.QueryRow(ctx, `SELECT min(id), max(id) FROM car_events`).Scan(&lo, &hi); err != nil {
		t.Fatal(err)
	}
	if hi-lo+1 != 2*each {
		t.Fatalf("positions %d to %d for %d records: not contiguous", lo, hi, 2*each)
	}

}

// Query filters and keeps the newest Limit, oldest first.
func TestEventsQuery(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a, b := openNode(t, url, "a"), openNode(t, url, "b")
	ca, cb := &chain{node: "a"}, &chain{node: "b"}
	for i := range 6 {
		a.events.Append(ca.next([]string{"proposal_received", "action_succeeded"}[i%2], fmt.Sprint("p", i%3)))
	}
	testwait.Eventually(t, eventualLimit, "a's 6 in", func() bool { return count(t, a) == 6 })
	b.events.Append(cb.next("action_failed", "p9"))
	testwait.Eventually(t, eventualLimit, "b's in", func() bool { return count(t, a) == 7 })
	ctx := ctxT(t)
	for _, tc := range []struct {
		q    store.EventFilter
		want string
	}{
		{store.EventFilter{}, "a:1,a:2,a:3,a:4,a:5,a:6,b:1"},
		{store.EventFilter{Kinds: []string{"action_succeeded", "action_failed"}}, "a:2,a:4,a:6,b:1"},
		{store.EventFilter{ProposalID: "p1"}, "a:2,a:5"},
		{store.EventFilter{Node: "b"}, "b:1"},
		{store.EventFilter{Node: "a", Limit: 2}, "a:5,a:6"},
		{store.EventFilter{Node: "a", Since: time.Date(2030, 1, 1, 0, 0, 2, 0, time.UTC), Until: time.Date(2030, 1, 1, 0, 0, 4, 0, time.UTC)}, "a:2,a:3"},
	} {
		recs, err := a.events.Query(ctx, tc.q)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range recs {
			got = append(got, fmt.Sprintf("%s:%d", r.Node, r.Seq))
		}
		if strings.Join(got, ",") != tc.want {
			t.Errorf("Query(%+v) = %v, want %s", tc.q, got, tc.want)
		}
	}
	recs, err := a.events.Query(ctx, store.EventFilter{Node: "b"})
	if err != nil || len(recs) != 1 {
		t.Fatal(err)
	}
	r := recs[0]
	want := cb.prev
	if r.Hash != want || r.Kind != "action_failed" || r.ProposalID != "p9" || r.Pos == 0 || !r.At.Equal(time.Date(2030, 1, 1, 0, 0, 1, 0, time.UTC)) {
		t.Fatalf("record read back = %+v", r)
	}
	if !strings.Contains(string(r.Body), `"who":"\u003cb\u003e"`) {
		t.Fatalf("body not kept as written: %s", r.Body)
	}
}

// LastOf counts what is still queued; Head is where Since starts for what
// comes next.
func TestEventsChains(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a, b := openNode(t, url, "a"), openNode(t, url, "b")
	ca, cb := &chain{node: "a"}, &chain{node: "b"}
	ca.append(a, 5)
	cb.append(b, 3)
	testwait.Eventually(t, eventualLimit, "8 in", func() bool { return count(t, a) == 8 })
	ctx := ctxT(t)
	if seq, hash, err := b.events.LastOf(ctx, "a"); err != nil || seq != 5 || hash != ca.prev {
		t.Fatalf("LastOf(a) = %d %q %v, want 5 and its hash", seq, hash, err)
	}
	if seq, hash, err := a.events.LastOf(ctx, "nobody"); err != nil || seq != 0 || hash != "" {
		t.Fatalf("LastOf(nobody) = %d %q %v", seq, hash, err)
	}
	// Held in the writer, seq 6 already counts for LastOf. (Reading the
	// writer's count orders its past inserts before the hook is set.)
	testwait.Eventually(t, eventualLimit, "a's writer done", func() bool { return a.EventStats().Written == 5 })
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	a.events.beforeInsert = func([]store.EventRecord) {
		once.Do(func() {
			close(entered)
			<-release
		})
	}
	ca.append(a, 1)
	<-entered
	seq, hash, err := a.events.LastOf(ctx, "a")
	close(release)
	if err != nil || seq != 6 || hash != ca.prev {
		t.Fatalf("LastOf with seq 6 queued = %d %q %v, want 6 and its hash", seq, hash, err)
	}
	testwait.Eventually(t, eventualLimit, "9 in", func() bool { return count(t, a) == 9 })

	head, err := b.events.Head(ctx)
	if err != nil || head < 9 {
		t.Fatalf("Head = %d %v, want the position of the 9th record", head, err)
	}
	if recs, _, err := b.events.Since(ctx, head, 10, ""); err != nil || len(recs) != 0 {
		t.Fatalf("Since(Head) = %d records %v, want none", len(recs), err)
	}
}

// A daemon reading the others' records gets none of its own, and its
// cursor moves past its own records at the end, so the next read does not
// look at them again; a full page stops at its last record.
func TestEventsSinceSkipsANode(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a, b := openNode(t, url, "a"), openNode(t, url, "b")
	ca, cb := &chain{node: "a"}, &chain{node: "b"}
	ctx := ctxT(t)
	ca.append(a, 3)
	testwait.Eventually(t, eventualLimit, "a's 3 in", func() bool { return count(t, a) == 3 })
	cb.append(b, 4)
	testwait.Eventually(t, eventualLimit, "b's 4 in", func() bool { return count(t, a) == 7 })
	ca.append(a, 5)
	testwait.Eventually(t, eventualLimit, "a's 5 more in", func() bool { return count(t, a) == 12 })
	head, err := a.events.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}

	recs, next, err := a.events.Since(ctx, 0, 100, "a")
	if err != nil || len(recs) != 4 || next != head {
		t.Fatalf("Since(0, skip a) = %d records, next %d (head %d), %v; want b's 4 and the head", len(recs), next, head, err)
	}
	for i, r := range recs {
		if r.Node != "b" || r.Seq != uint64(i+1) || len(r.Body) == 0 {
			t.Fatalf("record %d: %s:%d body %q", i, r.Node, r.Seq, r.Body)
		}
	}
	if more, again, err := a.events.Since(ctx, next, 100, "a"); err != nil || len(more) != 0 || again != head {
		t.Fatalf("Since(head, skip a) = %d records, next %d, %v; want none and the head", len(more), again, err)
	}

	page, pnext, err := a.events.Since(ctx, 0, 2, "a")
	if err != nil || len(page) != 2 || pnext != page[1].Pos || page[1].Seq != 2 {
		t.Fatalf("a page of 2 = %d records, next %d, %v; want b:1, b:2 and b:2's position", len(page), pnext, err)
	}
	rest, rnext, err := a.events.Since(ctx, pnext, 2, "a")
	if err != nil || len(rest) != 2 || rest[0].Seq != 3 || rnext != rest[1].Pos {
		t.Fatalf("the next page = %d records, next %d, %v; want b:3, b:4", len(rest), rnext, err)
	}
	if all, _, err := a.events.Since(ctx, 0, 100, ""); err != nil || len(all) != 12 {
		t.Fatalf("Since(0) skipping none = %d records, %v; want 12", len(all), err)
	}
}

// Close writes out what is queued; what is not JSON is refused and counted.
func TestEventsCloseFlushesAndInvalidIsCounted(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a := openNode(t, url, "a")
	c := &chain{node: "a"}
	c.append(a, 300)
	a.events.Append(store.EventRecord{Seq: 301, Kind: "x", Body: json.RawMessage(`{"torn":`)})
	st := a.EventStats()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if st.Dropped != 1 {
		t.Fatalf("an event that is not JSON was not refused: %+v", st)
	}
	a.events.Append(c.next("late", "p1"))
	if st := a.EventStats(); st.Dropped != 2 {
		t.Fatalf("an event after Close was not counted as refused: %+v", st)
	}
	b := openNode(t, url, "b")
	if n := count(t, b); n != 300 {
		t.Fatalf("after Close the database holds %d of 300", n)
	}
}

// The spool keeps whole lines: a line torn by a crash is cut off at open,
// and each node's newest record is found.
func TestSpoolTornLineAndScan(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "spool.jsonl")
	sp, scan, err := openSpool(path, 1<<20)
	if err != nil || scan.records != 0 {
		t.Fatal(scan, err)
	}
	ca, cb := &chain{node: "a"}, &chain{node: "b"}
	recs := []store.EventRecord{ca.next("k", ""), cb.next("k", ""), ca.next("k", "")}
	if n, err := sp.append(recs); err != nil || n != 3 {
		t.Fatal(n, err)
	}
	sp.close()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"node":"a","seq":3,"bo`)
	f.Close()
	sp, scan, err = openSpool(path, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.close()
	if scan.records != 3 || scan.torn == 0 || scan.last["a"].Seq != 2 || scan.last["b"].Hash != cb.prev {
		t.Fatalf("scan = %+v", scan)
	}
	got, end, bad, err := sp.next(10)
	if err != nil || bad != 0 || len(got) != 3 || end != sp.size || string(got[2].Body) != string(recs[2].Body) {
		t.Fatalf("next = %d records, end %d of %d, bad %d, %v", len(got), end, sp.size, bad, err)
	}
	if err := sp.advance(end); err != nil || sp.pending() {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Size() != 0 {
		t.Fatalf("a drained spool holds %d bytes", fi.Size())
	}
}
