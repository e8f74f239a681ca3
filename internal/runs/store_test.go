package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/parslee-ai/car-server/internal/runs"
	"github.com/parslee-ai/car-server/internal/store/file"
	"github.com/parslee-ai/car-server/internal/store/storetest"
)

// The store starts goroutines (its journals' writers, incomplete-marker
// timers); Close must wait for all of them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testWait bounds a wait for something the test caused; a hang guard.
const testWait = 20 * time.Second

func openRunStore(t *testing.T, root string, opts runs.Options) (*runs.Store, file.RunsReport) {
	t.Helper()
	s, rep, err := file.OpenRunStore(root, opts)
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

// turnRecords is the run's turn records, read back through Trace.
func turnRecords(t *testing.T, s *runs.Store, runID string) []runs.Record {
	t.Helper()
	recs, err := s.Trace(context.Background(), runID, 0)
	if err != nil {
		t.Fatalf("trace %s: %v", runID, err)
	}
	return turnsOf(recs)
}

// What the tests read of package runs' own (export_test.go).
var turnsOf = runs.TurnsOf

const (
	truncatedMark = runs.TruncatedMark
	turnOverMark  = runs.TurnOverMark
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
	// On a loaded machine the writers may finish before the last
	// subscribers join; the test needs at least one join under appends.
	if mid == 0 {
		t.Fatalf("none of %d subscribers joined mid-run: the test did not exercise a join under appends", subscribers)
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

// TestRunBoundsNameTheirSetting: past the runs in progress of an agent or
// of the daemon, or with an intent or outcome over its size, the store
// refuses and names the setting; a run that ends frees its place.
func TestRunBoundsNameTheirSetting(t *testing.T) {
	s, _ := openRunStore(t, t.TempDir(), runs.Options{MaxPerAgent: 2, MaxInProgress: 3, MaxIntentBytes: 8, MaxOutcomeBytes: 8})
	closeOnCleanup(t, s)
	ctx := context.Background()
	refused := func(err error, setting string) {
		t.Helper()
		var le *runs.LimitError
		if !errors.As(err, &le) || le.Setting != setting || !strings.Contains(err.Error(), setting) {
			t.Fatalf("got %v, want a refusal naming %s", err, setting)
		}
	}
	a1 := startRun(t, s, "a", "")
	startRun(t, s, "a", "")
	_, _, err := s.Start(ctx, runs.Start{AgentID: "a", Intent: "x", Owner: "c"})
	refused(err, "max_runs_per_agent")
	// Taking over a run of its own is not a new one.
	if _, existing, err := s.Start(ctx, runs.Start{RunID: a1, AgentID: "a", Intent: "x", Owner: "c2"}); err != nil || !existing {
		t.Fatalf("a take-over at the bound: existing %v, %v", existing, err)
	}
	startRun(t, s, "b", "")
	_, _, err = s.Start(ctx, runs.Start{AgentID: "c", Intent: "x", Owner: "c"})
	refused(err, "max_runs_in_progress")
	if err := s.Complete(ctx, a1, json.RawMessage(`{"too":"long"}`)); err == nil {
		t.Fatal("an outcome over max_run_outcome_bytes was accepted")
	} else {
		refused(err, "max_run_outcome_bytes")
	}
	if err := s.Complete(ctx, a1, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	startRun(t, s, "a", "")
	for _, st := range []runs.Start{{AgentID: "d", Intent: "nine byte"}, {AgentID: "d", Intent: "x", AgentName: "nine byte"}, {AgentID: "d", Intent: "x", OutcomeDescription: "nine byte"}} {
		_, _, err := s.Start(ctx, st)
		refused(err, "max_run_intent_bytes")
	}
}
