package file

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/auditlog"
	"github.com/parslee-ai/car-server/internal/store"
)

// testHash stands for the engine's event hash: the event's seq, link and
// body.
func testHash(seq uint64, prev string, body []byte) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%d|%s|%s", seq, prev, body))
	return hex.EncodeToString(sum[:])
}

// checkTestEvent is Verify's CheckEvent for testHash.
func checkTestEvent(l *auditlog.Line) error {
	if testHash(l.Seq, l.PrevHash, l.Body) != l.Hash {
		return errors.New("its body does not hash to its hash")
	}
	return nil
}

// chainLog appends n chained records after the log's newest, each of
// proposal p<seq%3>, a second apart from base.
func chainLog(e *Events, n int, base time.Time) {
	seq, prev, _ := e.LastOf(context.Background(), "")
	for range n {
		seq++
		body := fmt.Appendf(nil, `{"seq":%d,"pad":%q}`, seq, strings.Repeat("x", 200))
		h := testHash(seq, prev, body)
		e.Append(store.EventRecord{Node: "n1", Seq: seq, At: base.Add(time.Duration(seq) * time.Second), Kind: "action_succeeded",
			ProposalID: fmt.Sprint("p", seq%3), Hash: h, PrevHash: prev, Body: body})
		prev = h
	}
}

// headsSeen collects the heads a log signs, as a witness would.
type headsSeen struct {
	mu    sync.Mutex
	heads []auditlog.Head
}

func (h *headsSeen) add(x auditlog.Head) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.heads = append(h.heads, x)
}

func (h *headsSeen) all() []auditlog.Head {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]auditlog.Head(nil), h.heads...)
}

func openTestEvents(t *testing.T, dir string, mod func(*EventsConfig)) (*Events, *[]error) {
	t.Helper()
	var mu sync.Mutex
	var reports []error
	cfg := EventsConfig{Dir: filepath.Join(dir, "events"), KeyPath: filepath.Join(dir, "audit-key"), Node: "n1", HeadEvery: 50,
		Report: func(err error) { mu.Lock(); reports = append(reports, err); mu.Unlock() }}
	if mod != nil {
		mod(&cfg)
	}
	e, err := OpenEvents(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e, &reports
}

func verifyDir(t *testing.T, dir string, witness []auditlog.Head) (auditlog.Report, error) {
	t.Helper()
	key, err := auditlog.LoadKey(filepath.Join(dir, "audit-key"))
	if err != nil {
		t.Fatal(err)
	}
	return auditlog.Verify(auditlog.VerifyOptions{Dir: filepath.Join(dir, "events"), Public: key.Public().(ed25519.PublicKey), CheckEvent: checkTestEvent, Witness: witness})
}

func TestEventsSurviveARestartAndVerify(t *testing.T) {
	dir := t.TempDir()
	e, reports := openTestEvents(t, dir, nil)
	base := time.Now().Add(-time.Hour)
	chainLog(e, 120, base)
	if err := e.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e, _ = openTestEvents(t, dir, nil)
	defer e.Close()
	if seq, _, _ := e.LastOf(context.Background(), ""); seq != 120 {
		t.Fatalf("after a restart the chain ends at %d, want 120", seq)
	}
	chainLog(e, 10, base)
	got, err := e.Query(context.Background(), store.EventFilter{ProposalID: "p1"})
	if err != nil || len(got) != 44 || got[0].Seq != 1 || got[43].Seq != 130 {
		t.Fatalf("the events of p1 across the restart: %d %v", len(got), err)
	}
	newest, err := e.Query(context.Background(), store.EventFilter{Limit: 3})
	if err != nil || len(newest) != 3 || newest[0].Seq != 128 || newest[2].Seq != 130 {
		t.Fatalf("the newest three: %+v %v", newest, err)
	}
	page, next, err := e.Since(context.Background(), 118, 5, "")
	if err != nil || len(page) != 5 || page[0].Seq != 119 || next != 123 {
		t.Fatalf("Since(118, 5) = %d records from %v, next %d, %v", len(page), page, next, err)
	}
	if n, _ := e.Count(context.Background()); n != 130 {
		t.Fatalf("count %d, want 130", n)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := verifyDir(t, dir, nil)
	if err != nil || rep.Events != 130 || rep.HeadFile == nil || rep.HeadFile.Seq != 130 || rep.Heads < 2 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	if len(*reports) != 0 {
		t.Fatalf("reports of an intact log: %v", *reports)
	}
}

func TestEventsRetentionByBytesAndAge(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	clock := func() time.Time { return now }
	e, _ := openTestEvents(t, dir, func(c *EventsConfig) { c.MaxBytes = MinEventsMaxBytes; c.now = clock })
	chainLog(e, 3000, now.Add(-time.Hour)) // about 1.3 MB: 5 times the bound
	if err := e.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := e.Stats()
	if st.Bytes > MinEventsMaxBytes+e.segSize || st.Events >= 3000 {
		t.Fatalf("retention by bytes kept %d bytes, %d events (bound %d)", st.Bytes, st.Events, MinEventsMaxBytes)
	}
	first, err := e.Query(context.Background(), store.EventFilter{})
	if err != nil || first[0].Seq == 1 {
		t.Fatalf("the oldest events were kept: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if rep, err := verifyDir(t, dir, nil); err != nil || rep.Retentions == 0 || rep.FirstSeq != first[0].Seq {
		t.Fatalf("a retained log verifies from its retention record: %+v %v", rep, err)
	}
	// Age: a day later every sealed segment is older than a 1h retention.
	now = now.Add(24 * time.Hour)
	e, _ = openTestEvents(t, dir, func(c *EventsConfig) { c.MaxBytes = MinEventsMaxBytes; c.MaxAge = time.Hour; c.now = clock })
	if n, _ := e.Count(context.Background()); n != 0 {
		t.Fatalf("after the age retention %d events remain", n)
	}
	chainLog(e, 5, now)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if rep, err := verifyDir(t, dir, nil); err != nil || rep.Events != 5 || rep.FirstSeq != 3001 {
		t.Fatalf("after the age retention: %+v %v", rep, err)
	}
}

func TestEventsTornTailAndCorruptSegment(t *testing.T) {
	dir := t.TempDir()
	e, _ := openTestEvents(t, dir, func(c *EventsConfig) { c.MaxBytes = MinEventsMaxBytes })
	chainLog(e, 200, time.Now())
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	names, _ := auditlog.Segments(filepath.Join(dir, "events"))
	if len(names) < 3 {
		t.Fatalf("%d segments; the test needs an interior one", len(names))
	}
	last := filepath.Join(dir, "events", names[len(names)-1])
	f, err := os.OpenFile(last, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"key":"e","op":"event","seq":201,"at":"20`)
	f.Close()
	if rep, err := verifyDir(t, dir, nil); err != nil || rep.TornTail != names[len(names)-1] {
		t.Fatalf("a torn tail: %+v %v", rep, err)
	}
	interior := filepath.Join(dir, "events", names[1])
	b, _ := os.ReadFile(interior)
	b = bytes.Replace(b, []byte(`"op":"event"`), []byte(`"op":"ev\u0000nt`), 1)
	os.WriteFile(interior, append(b, []byte("garbage\n")...), 0o600)

	e, reports := openTestEvents(t, dir, func(c *EventsConfig) { c.MaxBytes = MinEventsMaxBytes })
	if seq, _, _ := e.LastOf(context.Background(), ""); seq != 200 {
		t.Fatalf("after a torn tail the chain ends at %d, want 200", seq)
	}
	chainLog(e, 1, time.Now())
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	corrupt := false
	for _, r := range *reports {
		corrupt = corrupt || strings.Contains(r.Error(), names[1]) && strings.Contains(r.Error(), "is corrupt")
	}
	if !corrupt || len(*reports) != 3 {
		t.Fatalf("reports at start: %v; want %s reported corrupt, and both edited segments reported changed since sealed", *reports, names[1])
	}
	if _, err := verifyDir(t, dir, nil); err == nil || !strings.Contains(err.Error(), names[1]) {
		t.Fatalf("verify of a corrupt interior segment: %v", err)
	}
}

// rewrite edits the lines of the events directory's segments, all of them
// in one list, and writes them back where they were.
func rewrite(t *testing.T, dir string, edit func(lines []string) []string) {
	t.Helper()
	evdir := filepath.Join(dir, "events")
	names, _ := auditlog.Segments(evdir)
	var all []string
	var per []int
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(evdir, n))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitAfter(string(b), "\n")
		lines = lines[:len(lines)-1]
		all = append(all, lines...)
		per = append(per, len(lines))
	}
	all = edit(all)
	for i, n := range names {
		k := min(per[i], len(all))
		if i == len(names)-1 {
			k = len(all)
		}
		os.WriteFile(filepath.Join(evdir, n), []byte(strings.Join(all[:k], "")), 0o600)
		all = all[k:]
	}
}

// eventLines are the indexes of the event lines among lines.
func eventLines(lines []string) []int {
	var out []int
	for i, l := range lines {
		if strings.Contains(l, `"op":"event"`) {
			out = append(out, i)
		}
	}
	return out
}

func TestVerifyCatchesTampering(t *testing.T) {
	build := func(t *testing.T, n int) (string, []auditlog.Head) {
		dir := t.TempDir()
		seen := &headsSeen{}
		e, _ := openTestEvents(t, dir, func(c *EventsConfig) { c.OnHead = seen.add })
		chainLog(e, n, time.Now())
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := verifyDir(t, dir, seen.all()); err != nil {
			t.Fatalf("the intact log: %v", err)
		}
		return dir, seen.all()
	}
	cases := []struct {
		name string
		do   func(t *testing.T, dir string)
		want string
	}{
		{"an edited event", func(t *testing.T, dir string) {
			rewrite(t, dir, func(l []string) []string {
				i := eventLines(l)[40]
				l[i] = strings.Replace(l[i], `"pad":"x`, `"pad":"y`, 1)
				return l
			})
		}, "edited"},
		{"a deleted interior event", func(t *testing.T, dir string) {
			rewrite(t, dir, func(l []string) []string { i := eventLines(l)[40]; return append(l[:i:i], l[i+1:]...) })
		}, "deleted"},
		{"a reordering", func(t *testing.T, dir string) {
			rewrite(t, dir, func(l []string) []string {
				ev := eventLines(l)
				l[ev[40]], l[ev[41]] = l[ev[41]], l[ev[40]]
				return l
			})
		}, "reordered"},
		{"a truncated tail below a signed head", func(t *testing.T, dir string) {
			rewrite(t, dir, func(l []string) []string { return l[:eventLines(l)[60]] })
		}, "truncated"},
		{"a log replaced by a consistent shorter one", func(t *testing.T, dir string) {
			other := t.TempDir()
			key, _ := os.ReadFile(filepath.Join(dir, "audit-key"))
			os.WriteFile(filepath.Join(other, "audit-key"), key, 0o600)
			e, _ := openTestEvents(t, other, nil)
			chainLog(e, 30, time.Now())
			e.Close()
			names, _ := auditlog.Segments(filepath.Join(dir, "events"))
			for _, n := range names {
				os.Remove(filepath.Join(dir, "events", n))
			}
			names, _ = auditlog.Segments(filepath.Join(other, "events"))
			for _, n := range names {
				b, _ := os.ReadFile(filepath.Join(other, "events", n))
				os.WriteFile(filepath.Join(dir, "events", n), b, 0o600)
			}
		}, "shorter"},
		{"a forged signature", func(t *testing.T, dir string) {
			rewrite(t, dir, func(l []string) []string {
				for i, s := range l {
					if strings.Contains(s, `"op":"head"`) {
						var h auditlog.Line
						json.Unmarshal([]byte(s), &h)
						h.Signature = strings.Repeat("A", 86) + "=="
						l[i] = string(h.Marshal())
						break
					}
				}
				return l
			})
		}, "forged"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, _ := build(t, 120)
			c.do(t, dir)
			_, err := verifyDir(t, dir, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("verify: %v; want a failure saying %q", err, c.want)
			}
		})
	}
	t.Run("a rewritten history a witness saw", func(t *testing.T) {
		dir, witness := build(t, 120)
		// Whoever holds the key rewrites the log, heads and head file
		// included: it verifies alone, not against the witness.
		os.RemoveAll(filepath.Join(dir, "events"))
		e, _ := openTestEvents(t, dir, nil)
		seq := uint64(0)
		prev := "forged"
		for range 120 {
			seq++
			body := fmt.Appendf(nil, `{"seq":%d}`, seq)
			p := prev
			if seq == 1 {
				p = ""
			}
			h := testHash(seq, p, body)
			e.Append(store.EventRecord{Node: "n1", Seq: seq, At: time.Now(), Kind: "k", Hash: h, PrevHash: p, Body: body})
			prev = h
		}
		e.Close()
		if _, err := verifyDir(t, dir, nil); err != nil {
			t.Fatalf("the rewritten log verifies alone: %v", err)
		}
		if _, err := verifyDir(t, dir, witness); err == nil || !strings.Contains(err.Error(), "rewritten") {
			t.Fatalf("verify against the witness: %v; want the rewrite caught", err)
		}
	})
}

// Append copies a record's body: the engine lends it from a pool and
// writes the next event's body into the same buffer once Append returns.
// Every record here shares one buffer, overwritten after each Append; the
// log still holds each body as it was appended, and verifies.
func TestAppendCopiesTheBody(t *testing.T) {
	dir := t.TempDir()
	e, _ := openTestEvents(t, dir, nil)
	buf := make([]byte, 0, 512)
	prev := ""
	at := time.Now().Add(-time.Minute)
	for seq := uint64(1); seq <= 300; seq++ {
		buf = fmt.Appendf(buf[:0], `{"seq":%d,"pad":%q}`, seq, strings.Repeat("y", int(seq%7)))
		h := testHash(seq, prev, buf)
		e.Append(store.EventRecord{Node: "n1", Seq: seq, At: at, Kind: "action_started", ProposalID: "p", Hash: h, PrevHash: prev, Body: buf})
		clear(buf[:cap(buf)])
		prev = h
	}
	if err := e.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if rep, err := verifyDir(t, dir, nil); err != nil || rep.Events != 300 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}

// Once aheadBytes of lines are queued, the writer writes them to the
// active segment before any Sync asks (their fsync is left to the next
// synced write); a Sync then makes them and the rest durable.
func TestEventsAreWrittenAheadOfASync(t *testing.T) {
	dir := t.TempDir()
	written := make(chan uint64, 64)
	e, reports := openTestEvents(t, dir, func(c *EventsConfig) {
		c.HeadEvery = 1 << 20
		c.period = time.Hour // no write on the clock: only a write ahead can come before the Sync
		c.written = func(seq uint64) { written <- seq }
	})
	defer e.Close()
	chainLog(e, 300, time.Now().Add(-time.Hour)) // about 470 bytes a line: two aheadBytes and more
	var ahead uint64
	select {
	case ahead = <-written:
	case <-time.After(10 * time.Second):
		t.Fatal("no lines were written ahead of a Sync")
	}
	if ahead == 0 || ahead > 300 {
		t.Fatalf("written ahead up to event %d, want some of the 300", ahead)
	}
	if st := e.Stats(); st.Durable != 0 || st.Events != 0 {
		t.Fatalf("before any Sync: %+v, want nothing durable or indexed: lines written ahead are not fsynced", st)
	}
	// The lines written ahead are in the segment, in order.
	names, err := auditlog.Segments(filepath.Join(dir, "events"))
	if err != nil || len(names) != 1 {
		t.Fatalf("segments %v, %v", names, err)
	}
	var seen uint64
	err = auditlog.ScanSegment(filepath.Join(dir, "events", names[0]), 0, func(_ int64, _ int, b []byte) bool {
		l, err := auditlog.ParseLine(b)
		if err != nil || l.Op != auditlog.OpEvent || l.Seq != seen+1 {
			t.Fatalf("line %d of the segment: %+v, %v", seen+1, l, err)
		}
		seen++
		return true
	})
	if err != nil || seen < ahead {
		t.Fatalf("the segment holds events 1..%d (%v) after a write ahead up to %d", seen, err, ahead)
	}
	if err := e.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := e.Stats(); st.Durable != 300 || st.Events != 300 {
		t.Fatalf("after Sync: %+v, want 300 events durable", st)
	}
	if got, err := e.Query(context.Background(), store.EventFilter{ProposalID: "p1"}); err != nil || len(got) != 100 {
		t.Fatalf("the events of p1: %d, %v", len(got), err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if rep, err := verifyDir(t, dir, nil); err != nil || rep.Events != 300 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	if len(*reports) != 0 {
		t.Fatalf("reports: %v", *reports)
	}
}

// Syncs from several goroutines, each after appends of its own, race the
// writer's writes ahead, its segment rolls and each other (one writes in
// its caller while the writer is idle, the others wait for it): each
// returns with its events durable, and the log verifies.
func TestConcurrentSyncsEachFindTheirEventsDurable(t *testing.T) {
	dir := t.TempDir()
	// Segments of 1 MiB: about six of them, none retained.
	e, reports := openTestEvents(t, dir, func(c *EventsConfig) { c.MaxBytes = 16 << 20 })
	var mu sync.Mutex // appends in seq order
	seq, prev := uint64(0), ""
	at := time.Now().Add(-time.Hour)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 60 {
				mu.Lock()
				for range 1 + (g*7+i*13)%100 {
					seq++
					body := fmt.Appendf(nil, `{"seq":%d,"pad":%q}`, seq, strings.Repeat("x", 200))
					h := testHash(seq, prev, body)
					e.Append(store.EventRecord{Node: "n1", Seq: seq, At: at, Kind: "action_succeeded", ProposalID: fmt.Sprint("g", g), Hash: h, PrevHash: prev, Body: body})
					prev = h
				}
				mine := seq
				mu.Unlock()
				if err := e.Sync(context.Background()); err != nil {
					t.Error(err)
					return
				}
				if d := e.Stats().Durable; d < mine {
					t.Errorf("Sync returned with events up to %d durable, want %d", d, mine)
					return
				}
			}
		})
	}
	wg.Wait()
	if st := e.Stats(); st.Segments < 3 || st.Events != int(seq) {
		t.Fatalf("%+v: want %d events indexed, in 3 segments or more (the test is to roll segments under the writes)", st, seq)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if rep, err := verifyDir(t, dir, nil); err != nil || rep.Events != int(seq) {
		t.Fatalf("verify: %+v %v, want %d events", rep, err, seq)
	}
	if len(*reports) != 0 {
		t.Fatalf("reports: %v", *reports)
	}
}
