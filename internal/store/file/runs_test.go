package file

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/runs"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/storetest"
)

func openRunStore(t *testing.T, root string, opts runs.Options) (*runs.Store, RunsReport) {
	t.Helper()
	s, rep, err := OpenRunStore(root, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, rep
}

// The helpers shared with the other tests of runs.Store.
var (
	closeOnCleanup = storetest.CloseRunsOnCleanup
	startRun       = storetest.StartRun
	promptTurns    = storetest.PromptTurns
	listRuns       = storetest.ListRuns
)

// turnsOf keeps the turn records of a trace.
func turnsOf(recs []runs.Record) []runs.Record {
	out := []runs.Record{}
	for _, r := range recs {
		if r.Record == runs.KindTurn {
			out = append(out, r)
		}
	}
	return out
}

// dropReason is the reason of a *DropError, or the error itself as text.
func dropReason(err error) string {
	var d *runs.DropError
	if errors.As(err, &d) {
		return d.Reason
	}
	return fmt.Sprintf("not a drop: %v", err)
}

func TestIDsNeverEscapeTheRunsDirectory(t *testing.T) {
	parent := t.TempDir()
	root := filepath.Join(parent, "runs")
	s, _ := openRunStore(t, root, runs.Options{})
	hostile := []string{"../x", "a/b", "%2e%2e", "..", ".", "/etc/passwd", `..\x`, "A", "a", "x\x00y"}
	for i, id := range hostile {
		startRun(t, s, id, fmt.Sprint("run-", i))
		startRun(t, s, "agent", id)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	top, err := os.ReadDir(parent)
	if err != nil || len(top) != 1 || top[0].Name() != "runs" {
		t.Fatalf("the runs directory's parent holds %v (%v), want only runs", top, err)
	}
	files := 0
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		parts := strings.Split(rel, string(filepath.Separator))
		if len(parts) != 2 || strings.HasPrefix(parts[0], ".") || strings.HasPrefix(parts[1], ".") {
			t.Errorf("run file %s is not <agent>/<run>.jsonl directly under the root", rel)
		}
		files++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := 2 * len(hostile); files != want {
		t.Fatalf("%d run files for %d runs: two ids share a file", files, want)
	}
	s2, rep := openRunStore(t, root, runs.Options{})
	closeOnCleanup(t, s2)
	if rep.Runs != 2*len(hostile) {
		t.Fatalf("reopened %d runs, want %d", rep.Runs, 2*len(hostile))
	}
	for i, id := range hostile {
		if got := listRuns(t, s2, id); len(got) != 1 || got[0].RunID != fmt.Sprint("run-", i) {
			t.Errorf("agent %q lists %+v after a reopen", id, got)
		}
		if agent, _, err := s2.Info(context.Background(), id); err != nil || agent != "agent" {
			t.Errorf("run %q reopened as agent %q (%v)", id, agent, err)
		}
	}
}

func TestATornTailIsCutOffAndTheRunMarkedIncomplete(t *testing.T) {
	root := t.TempDir()
	s, _ := openRunStore(t, root, runs.Options{})
	run := startRun(t, s, "alice", "r1")
	if _, err := s.Append(context.Background(), run, promptTurns(3, "t")); err != nil {
		t.Fatal(err)
	}
	done := startRun(t, s, "alice", "r2")
	if err := s.Complete(context.Background(), done, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, encodeID("alice"), encodeID("r1")+".jsonl")
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A crash in the middle of the fourth turn's line.
	if _, err := f.WriteString(`{"key":"00000004","op":"turn","record":"turn","index":3,"prom`); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	s2, rep := openRunStore(t, root, runs.Options{})
	closeOnCleanup(t, s2)
	if rep != (RunsReport{Runs: 2, Incomplete: 1, Torn: 1}) {
		t.Fatalf("load report %+v, want 2 runs, 1 incomplete, 1 torn", rep)
	}
	recs, err := s2.Trace(context.Background(), run, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 5 || recs[0].Record != runs.KindStarted || len(turnsOf(recs)) != 3 || recs[4].Record != runs.KindEnded || recs[4].Status != runs.StatusIncomplete {
		t.Fatalf("trace after recovery: %+v", recs)
	}
	for _, sum := range listRuns(t, s2, "alice") {
		want := map[string]string{"r1": runs.StatusIncomplete, "r2": runs.StatusCompleted}[sum.RunID]
		if sum.Status != want || sum.EndedAt == nil {
			t.Errorf("run %s: %s ended at %v, want %s", sum.RunID, sum.Status, sum.EndedAt, want)
		}
	}
	if _, err := s2.Append(context.Background(), run, promptTurns(1, "late")); dropReason(err) != runs.DropRunTerminal {
		t.Errorf("appending to a run marked incomplete: %v", err)
	}
}

func TestInteriorCorruptionIsRefused(t *testing.T) {
	root := t.TempDir()
	s, _ := openRunStore(t, root, runs.Options{})
	run := startRun(t, s, "alice", "r1")
	if _, err := s.Append(context.Background(), run, promptTurns(2, "t")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, encodeID("alice"), encodeID("r1")+".jsonl")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	lines[1] = "not json at all\n"
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := OpenRunStore(root, runs.Options{}); err == nil || !strings.Contains(err.Error(), "move the file aside") {
		t.Fatalf("a corrupt interior line: %v, want a refusal that says what to do", err)
	}
}

// TestRunFileLinesKeepTheirFormat: a line of a run file is the record with
// its key and op first, byte for byte what the daemon always wrote, so the
// files written before the run log stood behind the store seam load
// unchanged.
func TestRunFileLinesKeepTheirFormat(t *testing.T) {
	type oldLine struct {
		Key string `json:"key"`
		Op  string `json:"op"`
		runs.Record
	}
	at := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	for i, rec := range []runs.Record{
		{Record: runs.KindStarted, RunID: "r", AgentID: "a/b", Intent: "i", StartedAt: &at},
		{Record: runs.KindTurn, Turn: &runs.Turn{Index: 7, Prompt: "p\n\"q\"", Tool: "t", Parameters: map[string]any{"x": json.Number("1.50")}, VerifierVerdict: json.RawMessage(`"not_run"`)}},
		{Record: runs.KindEnded, Status: runs.StatusCompleted, Outcome: json.RawMessage(`{"ok":true}`), EndedAt: &at},
	} {
		body, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(oldLine{Key: fmt.Sprintf("%08d", i*1000), Op: rec.Record, Record: rec})
		if err != nil {
			t.Fatal(err)
		}
		if got := encodeLine(i*1000, store.RunRecord{Kind: rec.Record, Body: body}); string(got) != string(want) {
			t.Fatalf("record %d:\n got %s\nwant %s", i, got, want)
		}
	}
	if got := encodeLine(1, store.RunRecord{Kind: runs.KindTurn, Body: json.RawMessage(` { } `)}); string(got) != `{"key":"00000001","op":"turn"}` {
		t.Fatalf("an empty object: %s", got)
	}
}

// TestOpenRunJournalsAreBounded: with more runs in progress than
// journals may be open, appends to every run land, in order, while the
// open journals never pass the bound.
func TestOpenRunJournalsAreBounded(t *testing.T) {
	root := t.TempDir()
	const max, n = 4, 20
	l, _, err := OpenRuns(root, MaxOpenRunJournals(max))
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := runs.OpenLog(context.Background(), l, runs.Options{CloseLog: l.Close, MaxPerAgent: n})
	if err != nil {
		t.Fatal(err)
	}
	closeOnCleanup(t, s)
	open := func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.open.Len() > l.nopen {
			t.Fatalf("%d journals listed open, %d counted", l.open.Len(), l.nopen)
		}
		return l.nopen
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = startRun(t, s, "alice", fmt.Sprint("r", i))
		if got := open(); got > max {
			t.Fatalf("%d journals open after %d starts, bound %d", got, i+1, max)
		}
	}
	for round := range 3 {
		for _, id := range ids {
			if _, err := s.Append(context.Background(), id, promptTurns(1, fmt.Sprint("round", round))); err != nil {
				t.Fatal(err)
			}
			if got := open(); got > max {
				t.Fatalf("%d journals open, bound %d", got, max)
			}
		}
	}
	for _, id := range ids {
		recs, err := s.Trace(context.Background(), id, 0)
		if err != nil {
			t.Fatal(err)
		}
		turns := turnsOf(recs)
		if len(turns) != 3 {
			t.Fatalf("run %s has %d turns, want 3: %+v", id, len(turns), recs)
		}
		for i, rec := range turns {
			if rec.Index != i || rec.Prompt != fmt.Sprintf("round%d-0", i) {
				t.Fatalf("run %s turn %d: %+v", id, i, rec)
			}
		}
	}
}

// TestHeadsAreReadWhenUsed: a reopened log reads no head of a run that
// ended until the run is used, and then has it whole: intent, owner, node
// and outcome included.
func TestHeadsAreReadWhenUsed(t *testing.T) {
	root := t.TempDir()
	s, _ := openRunStore(t, root, runs.Options{})
	const n = 30
	for i := range n {
		id := startRun(t, s, "alice", fmt.Sprint("r", i))
		if err := s.Complete(context.Background(), id, json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	live := startRun(t, s, "alice", "live")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	l, rep, err := OpenRuns(root, RunsNode("node-7"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if rep.Runs != n+1 || l.HeadsLoaded() != 1 {
		t.Fatalf("reopened: %+v with %d heads read, want %d runs and only the one in progress read", rep, l.HeadsLoaded(), n+1)
	}
	h, err := l.Head(context.Background(), "r7")
	if err != nil {
		t.Fatal(err)
	}
	if h.Intent != "test" || h.Owner != "conn-1" || h.Node != "node-7" || string(h.Outcome) != `{"n":7}` || h.Status != runs.StatusCompleted || h.Records != 2 {
		t.Fatalf("the head read when used: %+v", h)
	}
	if l.HeadsLoaded() != 2 {
		t.Fatalf("%d heads read after one Head, want 2", l.HeadsLoaded())
	}
	l.mu.Lock()
	kept := l.runs["r7"].head
	l.mu.Unlock()
	if kept.Intent != "" || kept.Outcome != nil {
		t.Fatalf("the head kept in memory holds its intent or outcome: %+v", kept)
	}
	if stranded, err := l.Stranded(context.Background()); err != nil || len(stranded) != 1 || stranded[0].RunID != live {
		t.Fatalf("Stranded = %+v %v", stranded, err)
	}
}

// TestRecordsReadBackAsAppended: a record read back is its body as it was
// appended, the key and op of its line taken off; an owner line is not a
// record.
func TestRecordsReadBackAsAppended(t *testing.T) {
	for _, body := range []string{`{"record":"turn","index":3}`, `{}`, `{"key":"its own","op":"too","n":[1,{"a":"}"}]}`} {
		line := encodeLine(12, store.RunRecord{Kind: runs.KindTurn, Body: json.RawMessage(body)})
		got, owner, err := recordBody(line)
		if err != nil || owner || string(got) != body {
			t.Fatalf("%s read back from %s as %s (owner %v, %v)", body, line, got, owner, err)
		}
	}
	if _, owner, err := recordBody(ownerLine("conn-1", "node-1")); err != nil || !owner {
		t.Fatalf("an owner line: owner %v, %v", owner, err)
	}
	if _, _, err := recordBody([]byte(`{"op":"turn","key":"00000001"}`)); err == nil {
		t.Fatal("a line that does not start with its key and op was read as a record")
	}
}

// TestNoJournalOpensAfterClose: a write to the log after its Close is
// refused, and opens no journal that nothing would close.
func TestNoJournalOpensAfterClose(t *testing.T) {
	l, _, err := OpenRuns(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := runs.Head{RunID: "r1", AgentID: "alice", Owner: "conn-1", StartedAt: time.Now().UTC()}
	if _, _, err := l.Start(context.Background(), h, startedRecord(h)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = l.Append(context.Background(), "r1", func(h runs.Head) (runs.Batch, error) {
		return runs.Batch{Records: []runs.LogRecord{{Kind: runs.KindTurn, Body: json.RawMessage(`{"record":"turn"}`)}}}, nil
	})
	h2 := runs.Head{RunID: "r2", AgentID: "alice", Owner: "conn-1", StartedAt: time.Now().UTC()}
	_, _, err2 := l.Start(context.Background(), h2, startedRecord(h2))
	l.mu.Lock()
	open := l.nopen
	l.mu.Unlock()
	if !errors.Is(err, errRunsClosed) || !errors.Is(err2, errRunsClosed) || open != 0 {
		t.Fatalf("after Close: Append %v, Start %v, %d journals open; want both refused and none open", err, err2, open)
	}
}

// startedRecord is a run's record 0 as package runs writes it.
func startedRecord(h runs.Head) runs.LogRecord {
	b, _ := json.Marshal(map[string]any{"record": runs.KindStarted, "run_id": h.RunID, "agent_id": h.AgentID, "intent": h.Intent, "started_at": h.StartedAt})
	return runs.LogRecord{Kind: runs.KindStarted, Body: b}
}

// TestAppendsThatRaceAcrossEvictionsAllLand: goroutines append to, read
// and ask the heads of more runs than journals may be open, so journals
// are closed and opened again under them; every turn lands, in order, and
// a head still has its intent.
func TestAppendsThatRaceAcrossEvictionsAllLand(t *testing.T) {
	root := t.TempDir()
	l, _, err := OpenRuns(root, MaxOpenRunJournals(2))
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := runs.OpenLog(context.Background(), l, runs.Options{CloseLog: l.Close, MaxPerAgent: 100})
	if err != nil {
		t.Fatal(err)
	}
	closeOnCleanup(t, s)
	const n, goroutines, rounds = 6, 8, 10
	ids := make([]string, n)
	for i := range ids {
		ids[i] = startRun(t, s, "alice", fmt.Sprint("r", i))
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range rounds {
				id := ids[(g+k)%n]
				if _, err := s.Append(context.Background(), id, promptTurns(1, "x")); err != nil {
					t.Error(err)
					return
				}
				if _, err := s.Trace(context.Background(), id, 0); err != nil {
					t.Error(err)
					return
				}
				if _, err := l.Head(context.Background(), id); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, id := range ids {
		recs, err := s.Trace(context.Background(), id, 0)
		if err != nil {
			t.Fatal(err)
		}
		tt := turnsOf(recs)
		for i, r := range tt {
			if r.Index != i {
				t.Fatalf("run %s: turn %d has index %d", id, i, r.Index)
			}
		}
		total += len(tt)
	}
	if total != goroutines*rounds {
		t.Fatalf("%d turns landed, want %d", total, goroutines*rounds)
	}
	h, err := l.Head(context.Background(), ids[0])
	if err != nil || h.Intent != "test" {
		t.Fatalf("the head after the race: %+v %v", h, err)
	}
}

// A power loss can leave the last line of a run file as zero bytes and a
// newline (the write's first page lost, its last one kept): the run loads
// as one left in progress, the torn line is cut off, and a file with
// nothing before such a line is removed, as an empty one is.
func TestALineOfZeroBytesAtTheEndIsATornTail(t *testing.T) {
	root := t.TempDir()
	s, _ := openRunStore(t, root, runs.Options{})
	run := startRun(t, s, "alice", "r1")
	if _, err := s.Append(context.Background(), run, promptTurns(2, "t")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, encodeID("alice"))
	path := filepath.Join(dir, encodeID("r1")+".jsonl")
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(strings.Repeat("\x00", 300) + `"index":2}` + "\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	never := filepath.Join(dir, encodeID("r2")+".jsonl")
	if err := os.WriteFile(never, []byte(strings.Repeat("\x00", 40)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	s2, rep := openRunStore(t, root, runs.Options{})
	closeOnCleanup(t, s2)
	if rep != (RunsReport{Runs: 1, Incomplete: 1, Torn: 1}) {
		t.Fatalf("load report %+v, want 1 run, 1 incomplete, 1 torn", rep)
	}
	recs, err := s2.Trace(context.Background(), run, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 4 || len(turnsOf(recs)) != 2 || recs[3].Record != runs.KindEnded || recs[3].Status != runs.StatusIncomplete {
		t.Fatalf("trace after recovery: %+v", recs)
	}
	if _, err := os.Stat(never); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a run file holding only a torn line is still there: %v", err)
	}
}
