package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/runs"
	"github.com/parslee-ai/car-server/protocol"
)

// runsCrashTrialsEnv overrides the number of SIGKILLs the run-trace crash
// test deals (runsCrashTrials by default); the seed replays with
// CAR_CRASH_SEED as for the idempotency crash test.
const runsCrashTrialsEnv = "CAR_RUNS_CRASH_TRIALS"

// runsCrashTrials is the default trial count: each starts the daemon once
// and kills it once.
const runsCrashTrials = 16

// runsCrashStreams is how many clients stream record_turns into a trial's
// run at once, so that a kill lands between interleaved batches.
const runsCrashStreams = 2

// issueAgentToken runs `car-server agents issue-token` on the state root
// and returns the token it printed.
func issueAgentToken(t *testing.T, home, agent string) string {
	t.Helper()
	token, err := runIssueToken(home, agent)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// runIssueToken is issueAgentToken for a goroutine other than the test's.
func runIssueToken(home, agent string) (string, error) {
	cmd := exec.Command(binary, "agents", "issue-token", agent)
	cmd.Env = append(os.Environ(), "CAR_HOME="+home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("agents issue-token %s: %w: %s", agent, err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// ackedBatch is one record_turns batch the daemon acknowledged.
type ackedBatch struct {
	base    int
	prompts []string
}

// runLedger is what the test streamed into one run and what came back ok.
type runLedger struct {
	runID string
	mu    sync.Mutex
	acked []ackedBatch
}

// streamTurns sends batches of 1..8 turns to runID until a call fails (the
// daemon died), recording each acknowledged batch and signalling ackedOne.
func streamTurns(ctx context.Context, c *client.Client, rl *runLedger, name string, sizes []int, ackedOne chan<- struct{}) error {
	for b := 0; ; b++ {
		n := sizes[b%len(sizes)]
		turns := make([]any, n)
		prompts := make([]string, n)
		for i := range turns {
			prompts[i] = fmt.Sprintf("%s-b%d-%d", name, b, i)
			turns[i] = map[string]any{"prompt": prompts[i], "tool": "edit", "output": "ok"}
		}
		var r struct {
			BaseIndex int    `json:"base_index"`
			Count     int    `json:"count"`
			OK        bool   `json:"ok"`
			Dropped   string `json:"dropped"`
		}
		if err := c.Call(ctx, protocol.MethodRunsRecordTurns, map[string]any{"run_id": rl.runID, "turns": turns}, &r); err != nil {
			return err
		}
		if !r.OK || r.Count != n {
			return fmt.Errorf("%s batch %d of %d turns: ok=%v count=%d dropped=%q, while the daemon was alive", name, b, n, r.OK, r.Count, r.Dropped)
		}
		rl.mu.Lock()
		rl.acked = append(rl.acked, ackedBatch{base: r.BaseIndex, prompts: prompts})
		rl.mu.Unlock()
		select {
		case ackedOne <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// checkRuns reads every run so far through runs.get_trace and fails the
// test unless each acknowledged turn is there, at the index its batch was
// acknowledged at, with the turns contiguous from 0 and the run ended.
// It returns the acknowledged, lost and present turn counts.
func checkRuns(t *testing.T, c *client.Client, ledgers []*runLedger) (acked, lost, present int) {
	t.Helper()
	for _, rl := range ledgers {
		var tr struct {
			NotFound bool          `json:"not_found"`
			Records  []runs.Record `json:"records"`
		}
		if err := c.Call(ctxT(t), protocol.MethodRunsGetTrace, map[string]any{"run_id": rl.runID}, &tr); err != nil {
			t.Fatalf("run %s: runs.get_trace after a restart: %v", rl.runID, err)
		}
		if tr.NotFound {
			t.Fatalf("run %s is not found after a restart", rl.runID)
		}
		var prompts []string
		ended := ""
		for _, rec := range tr.Records {
			switch rec.Record {
			case runs.KindTurn:
				if rec.Turn.Index != len(prompts) {
					t.Fatalf("run %s: turn %d is at position %d: the trace is out of order or has a gap", rl.runID, rec.Turn.Index, len(prompts))
				}
				p, _ := rec.Turn.Prompt.(string)
				prompts = append(prompts, p)
			case runs.KindEnded:
				ended = rec.Status
			}
		}
		if ended != runs.StatusIncomplete {
			t.Errorf("run %s: ended %q after the daemon died under it, want %q", rl.runID, ended, runs.StatusIncomplete)
		}
		rl.mu.Lock()
		for _, b := range rl.acked {
			for i, want := range b.prompts {
				acked++
				if idx := b.base + i; idx >= len(prompts) || prompts[idx] != want {
					lost++
					t.Errorf("run %s: acknowledged turn %q (index %d) is lost after SIGKILL; the trace holds %d turns", rl.runID, want, idx, len(prompts))
				}
			}
		}
		rl.mu.Unlock()
		present += len(prompts)
	}
	return acked, lost, present
}

func TestCrashDuringRecordTurnsLosesNoAcknowledgedTurn(t *testing.T) {
	if testing.Short() {
		t.Skip("crash trials run the daemon many times")
	}
	trials := runsCrashTrials
	if v := os.Getenv(runsCrashTrialsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s must be a positive trial count, got %q", runsCrashTrialsEnv, v)
		}
		trials = n
	}
	seed := crashSeed(t)
	t.Logf("seed %d (replay with %s=%d)", seed, crashSeedEnv, seed)
	rng := rand.New(rand.NewSource(seed))
	home := t.TempDir()
	const agent = "crash-agent"
	token := issueAgentToken(t, home, agent)

	var ledgers []*runLedger
	for trial := 0; trial < trials; trial++ {
		d := startDaemon(t, home) // fails the test unless the runs directory loads
		c, err := client.Dial(ctxT(t), "ws://"+d.addr+"/", &client.Options{Token: token, AgentID: agent})
		if err != nil {
			t.Fatalf("trial %d: bind %s: %v", trial, agent, err)
		}
		checkRuns(t, c, ledgers)

		var started struct {
			RunID string `json:"run_id"`
		}
		if err := c.Call(ctxT(t), protocol.MethodRunsStart, map[string]any{"intent": fmt.Sprint("crash trial ", trial)}, &started); err != nil {
			t.Fatalf("trial %d: runs.start: %v", trial, err)
		}
		rl := &runLedger{runID: started.RunID}
		ledgers = append(ledgers, rl)

		// The crash point: after the crashAt-th acknowledged batch, with the
		// streams still sending.
		crashAt := 1 + rng.Intn(30)
		sizes := make([]int, 16)
		for i := range sizes {
			sizes[i] = 1 + rng.Intn(8)
		}
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		ackedOne := make(chan struct{})
		errs := make(chan error, runsCrashStreams)
		for s := 0; s < runsCrashStreams; s++ {
			go func() {
				errs <- streamTurns(ctx, c, rl, fmt.Sprintf("t%d-s%d", trial, s), sizes[s:], ackedOne)
			}()
		}
		for n := 0; n < crashAt; n++ {
			select {
			case <-ackedOne:
			case err := <-errs:
				cancel()
				t.Fatalf("trial %d: a stream stopped before the crash point: %v", trial, err)
			}
		}
		d.kill(t)
		// Drain the acknowledgements the streams had in hand at the kill.
		for s := 0; s < runsCrashStreams; {
			select {
			case <-ackedOne:
			case err := <-errs:
				s++
				if err == nil || ctx.Err() != nil {
					cancel()
					t.Fatalf("trial %d: a stream did not see the daemon die: %v", trial, err)
				}
			}
		}
		cancel()
		if err := c.Close(); err != nil {
			t.Fatalf("trial %d: close the client: %v", trial, err)
		}
	}

	// Restart once more: every run, every acknowledged turn.
	d := startDaemon(t, home)
	c, err := client.Dial(ctxT(t), "ws://"+d.addr+"/", &client.Options{Token: token, AgentID: agent})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	acked, lost, present := checkRuns(t, c, ledgers)
	var list struct {
		Runs []runs.Summary `json:"runs"`
	}
	if err := c.Call(ctxT(t), protocol.MethodRunsList, map[string]any{"agent_id": agent}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Runs) != trials {
		t.Errorf("runs.list holds %d runs after %d crashed trials", len(list.Runs), trials)
	}
	if acked == 0 {
		t.Fatal("no batch was acknowledged before a crash: the test exercised nothing")
	}
	t.Logf("%d trials, %d acknowledged turns, %d lost, %d more on disk that were written but not yet acknowledged at the kill",
		trials, acked, lost, present-acked+lost)
}
