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
)

// testWait bounds a wait for something the test caused; a hang guard.
const testWait = 20 * time.Second

func openRunStore(t *testing.T, root string, opts runs.Options) (*runs.Store, RunsReport) {
	t.Helper()
	s, rep, err := OpenRunStore(root, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, rep
}

// closeOnCleanup closes s when the test ends, failing it on an error.
func closeOnCleanup(t *testing.T, s *runs.Store) {
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close the store: %v", err)
		}
	})
}

func startRun(t *testing.T, s *runs.Store, agent, runID string) string {
	t.Helper()
	id, _, err := s.Start(context.Background(), runs.Start{RunID: runID, AgentID: agent, Intent: "test", Owner: "conn-1"})
	if err != nil {
		t.Fatalf("start run %q of %q: %v", runID, agent, err)
	}
	return id
}

func promptTurns(n int, prefix string) []runs.Turn {
	out := make([]runs.Turn, n)
	for i := range out {
		out[i] = runs.Turn{Prompt: fmt.Sprintf("%s-%d", prefix, i), Index: 999}
	}
	return out
}

// turnRecords is the run's turn records, read back through Trace.
func turnRecords(t *testing.T, s *runs.Store, runID string) []runs.Record {
	t.Helper()
	recs, err := s.Trace(context.Background(), runID, 0)
	if err != nil {
		t.Fatalf("trace %s: %v", runID, err)
	}
	return turnsOf(recs)
}

// listRuns is the agent's runs, failing the test on an error.
func listRuns(t *testing.T, s *runs.Store, agent string) []runs.Summary {
	t.Helper()
	got, err := s.List(context.Background(), agent)
	if err != nil {
		t.Fatalf("list %s: %v", agent, err)
	}
	return got
}

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

// The markers package runs puts in place of what its bounds cut, as a
// client reads them.
const (
	truncatedMark = "…[truncated]"
	turnOverMark  = "…[truncated: turn exceeded 256 KiB]"
)

// dropReason is the reason of a *DropError, or the error itself as text.
func dropReason(err error) string {
	var d *runs.DropError
	if errors.As(err, &d) {
		return d.Reason
	}
	return fmt.Sprintf("not a drop: %v", err)
}

func TestTheStoreOwnsTheIndexAndBoundsEachField(t *testing.T) {
	s, _ := openRunStore(t, t.TempDir(), runs.Options{})
	closeOnCleanup(t, s)
	run := startRun(t, s, "alice", "r1")
	ctx := context.Background()

	if base, err := s.Append(ctx, run, promptTurns(2, "a")); err != nil || base != 0 {
		t.Fatalf("first batch: base %d, %v", base, err)
	}
	long := strings.Repeat("é", runs.MaxFieldBytes) // 2 bytes a rune: the cut falls inside one
	turns := []runs.Turn{{Prompt: long, Parameters: map[string]any{"path": long, "n": 1}, Output: []any{long}}}
	if base, err := s.Append(ctx, run, turns); err != nil || base != 2 {
		t.Fatalf("second batch: base %d, %v", base, err)
	}
	got := turnRecords(t, s, run)
	for i, r := range got {
		if r.Turn.Index != i {
			t.Fatalf("turn %d carries index %d: the client's index (999) must not count", i, r.Turn.Index)
		}
	}
	cut := got[2].Turn
	prompt, _ := cut.Prompt.(string)
	if !strings.HasSuffix(prompt, truncatedMark) || len(prompt) > runs.MaxFieldBytes+len(truncatedMark) || !json.Valid([]byte(`"`+prompt+`"`)) {
		t.Fatalf("prompt of %d bytes not cut to %d at a rune boundary and marked: %d bytes, ends %q", len(long), runs.MaxFieldBytes, len(prompt), prompt[len(prompt)-20:])
	}
	params, _ := cut.Parameters.(map[string]any)
	if p, _ := params["path"].(string); !strings.HasSuffix(p, truncatedMark) {
		t.Errorf("a string nested in parameters is not cut: %d bytes", len(p))
	}
	out, _ := cut.Output.([]any)
	if len(out) != 1 || !strings.HasSuffix(out[0].(string), truncatedMark) {
		t.Errorf("a string nested in output is not cut: %v", len(out))
	}
	if string(cut.VerifierVerdict) != `"not_run"` {
		t.Errorf("a turn without a verdict reads %s, want \"not_run\"", cut.VerifierVerdict)
	}
}

func TestATurnOverTheCapLosesItsFreeTextThenIsDropped(t *testing.T) {
	s, _ := openRunStore(t, t.TempDir(), runs.Options{})
	closeOnCleanup(t, s)
	run := startRun(t, s, "alice", "r1")
	ctx := context.Background()

	// Each field within MaxFieldBytes, the turn far over MaxTurnBytes.
	many := make([]any, 40)
	for i := range many {
		many[i] = strings.Repeat("x", runs.MaxFieldBytes)
	}
	if _, err := s.Append(ctx, run, []runs.Turn{{Prompt: "keep?", Tool: "t", Parameters: many, Output: many}}); err != nil {
		t.Fatalf("a turn its free text can bring under the cap: %v", err)
	}
	got := turnRecords(t, s, run)[0].Turn
	if got.Prompt != turnOverMark || got.Parameters != turnOverMark || got.Output != turnOverMark || got.Tool != "t" {
		t.Fatalf("over-cap turn: prompt %v, tool %q, parameters and output replaced: %v %v", got.Prompt, got.Tool, got.Parameters == turnOverMark, got.Output == turnOverMark)
	}

	// A pass-through field over the cap cannot be bounded: the batch is
	// refused whole, the good turn before it included.
	huge := json.RawMessage(`"` + strings.Repeat("y", runs.MaxTurnBytes) + `"`)
	_, err := s.Append(ctx, run, []runs.Turn{{Prompt: "fine"}, {CliOutcome: huge}})
	if dropReason(err) != runs.DropTurnTooLarge {
		t.Fatalf("an unboundable turn: %v, want %s", err, runs.DropTurnTooLarge)
	}
	if n := len(turnRecords(t, s, run)); n != 1 {
		t.Fatalf("a dropped batch left %d turns, want the 1 before it", n)
	}
}

func TestEachDropReason(t *testing.T) {
	s, _ := openRunStore(t, t.TempDir(), runs.Options{})
	closeOnCleanup(t, s)
	ctx := context.Background()

	if _, err := s.Append(ctx, "no-such-run", promptTurns(1, "x")); dropReason(err) != runs.DropRunNotFound {
		t.Errorf("unknown run: %v, want %s", err, runs.DropRunNotFound)
	}

	full := startRun(t, s, "alice", "full")
	for n := 0; n < runs.MaxTurns-1; n += runs.MaxBatch {
		if _, err := s.Append(ctx, full, promptTurns(min(runs.MaxBatch, runs.MaxTurns-1-n), "f")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Append(ctx, full, promptTurns(2, "over")); dropReason(err) != runs.DropRunTurnLimit {
		t.Errorf("a batch past %d turns: %v, want %s", runs.MaxTurns, err, runs.DropRunTurnLimit)
	}
	if base, err := s.Append(ctx, full, promptTurns(1, "last")); err != nil || base != runs.MaxTurns-1 {
		t.Errorf("the last turn that fits: base %d, %v", base, err)
	}
	if _, err := s.Append(ctx, full, promptTurns(1, "over")); dropReason(err) != runs.DropRunTurnLimit {
		t.Errorf("a turn past %d: %v, want %s", runs.MaxTurns, err, runs.DropRunTurnLimit)
	}

	done := startRun(t, s, "alice", "done")
	if err := s.Complete(ctx, done, json.RawMessage(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, done, promptTurns(1, "late")); dropReason(err) != runs.DropRunTerminal {
		t.Errorf("a completed run: %v, want %s", err, runs.DropRunTerminal)
	}
	if err := s.Complete(ctx, done, nil); err == nil || errors.Is(err, runs.ErrNotFound) {
		t.Errorf("a second complete: %v, want an already-ended error", err)
	}
}

// feed collects one subscriber's events; its push never blocks.
type feed struct {
	mu     sync.Mutex
	events []runs.Event
}

func (f *feed) push(e runs.Event) {
	f.mu.Lock()
	f.events = append(f.events, e)
	f.mu.Unlock()
}

func TestSnapshotAndSubscribeAreAtomicUnderConcurrentAppends(t *testing.T) {
	s, _ := openRunStore(t, t.TempDir(), runs.Options{})
	closeOnCleanup(t, s)
	run := startRun(t, s, "alice", "r1")
	ctx := context.Background()

	const writers, batches, subscribers = 4, 25, 12
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	appended := make(chan struct{}, writers*batches) // one per acknowledged batch
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := 0; b < batches; b++ {
				if _, err := s.Append(ctx, run, promptTurns(1+(w+b)%3, fmt.Sprint("w", w))); err != nil {
					errs <- err
					return
				}
				appended <- struct{}{}
			}
		}()
	}
	type sub struct {
		snap runs.Snapshot
		f    *feed
	}
	subs := make([]sub, subscribers)
	for i := range subs {
		// Join after a few more batches are down, the writers still going.
		for n := 0; n < writers*batches/(2*subscribers); n++ {
			select {
			case <-appended:
			case err := <-errs:
				t.Fatal(err)
			}
		}
		f := &feed{}
		snap, err := s.Subscribe(ctx, run, fmt.Sprint("sub", i), f.push)
		if err != nil {
			t.Fatal(err)
		}
		subs[i] = sub{snap, f}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := len(turnRecords(t, s, run))
	mid := 0
	for i, sb := range subs {
		if sb.snap.Cursor != len(sb.snap.TurnsSoFar) {
			t.Fatalf("subscriber %d: snapshot cursor %d with %d turns", i, sb.snap.Cursor, len(sb.snap.TurnsSoFar))
		}
		if sb.snap.Cursor > 0 && sb.snap.Cursor < total {
			mid++
		}
		next := 0
		for _, r := range sb.snap.TurnsSoFar {
			if r.Turn.Index != next {
				t.Fatalf("subscriber %d: snapshot turn %d at position %d", i, r.Turn.Index, next)
			}
			next++
		}
		sb.f.mu.Lock()
		for _, e := range sb.f.events {
			if e.Record.Turn.Index != next || e.Cursor != next+1 {
				t.Fatalf("subscriber %d: after %d turns got turn %d at cursor %d: a gap or a repeat", i, next, e.Record.Turn.Index, e.Cursor)
			}
			next++
		}
		sb.f.mu.Unlock()
		if next != total {
			t.Fatalf("subscriber %d saw %d of %d turns", i, next, total)
		}
	}
	if mid != subscribers {
		t.Fatalf("%d of %d subscribers joined mid-run: the test did not exercise a join under appends", mid, subscribers)
	}
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

func TestAnOrphanedRunIsMarkedIncompleteAfterTheGrace(t *testing.T) {
	s, _ := openRunStore(t, t.TempDir(), runs.Options{Grace: time.Millisecond})
	closeOnCleanup(t, s)
	run := startRun(t, s, "alice", "r1")
	ended := make(chan runs.Event, 4)
	if _, err := s.Subscribe(context.Background(), run, "watch", func(e runs.Event) {
		if e.Record.Record == runs.KindEnded {
			ended <- e
		}
	}); err != nil {
		t.Fatal(err)
	}
	s.Orphan(run, "another-conn") // not the owner: nothing happens
	s.Orphan(run, "conn-1")
	select {
	case e := <-ended:
		if e.Record.Status != runs.StatusIncomplete || e.Status != runs.StatusIncomplete {
			t.Fatalf("the orphan's end: %+v", e)
		}
	case <-time.After(testWait):
		t.Fatal("no incomplete marker")
	}
	if sum := listRuns(t, s, "alice"); len(sum) != 1 || sum[0].Status != runs.StatusIncomplete {
		t.Fatalf("after the grace: %+v", sum)
	}
}

func TestAnIdempotentStartReturnsTheRunButNotAnotherAgents(t *testing.T) {
	s, _ := openRunStore(t, t.TempDir(), runs.Options{})
	closeOnCleanup(t, s)
	ctx := context.Background()
	id, existing, err := s.Start(ctx, runs.Start{RunID: "k", AgentID: "alice", Intent: "i", Owner: "c1"})
	if err != nil || existing || id != "k" {
		t.Fatalf("first start: %q %v %v", id, existing, err)
	}
	id, existing, err = s.Start(ctx, runs.Start{RunID: "k", AgentID: "alice", Intent: "i", Owner: "c2"})
	if err != nil || !existing || id != "k" {
		t.Fatalf("second start: %q %v %v", id, existing, err)
	}
	if _, owner, _ := s.Info(ctx, "k"); owner != "c2" {
		t.Errorf("the re-start did not take the run over: owner %q", owner)
	}
	if _, _, err := s.Start(ctx, runs.Start{RunID: "k", AgentID: "bob", Intent: "i"}); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("bob starting alice's key: %v, want ErrNotFound", err)
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
