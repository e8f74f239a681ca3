package file

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
