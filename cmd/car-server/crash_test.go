package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/journal"
	"github.com/parslee-ai/car-server/protocol"
)

// crashSeedEnv names the environment variable that replays a crash run:
// the test logs its seed, and CAR_CRASH_SEED=<seed> go test -run Crash
// ./cmd/car-server/ crashes at the same points (counted in tool calls) again.
const crashSeedEnv = "CAR_CRASH_SEED"

// crashSeed is the seed in CAR_CRASH_SEED, or a fresh one.
func crashSeed(t *testing.T) int64 {
	t.Helper()
	v := os.Getenv(crashSeedEnv)
	if v == "" {
		return time.Now().UnixNano()
	}
	seed, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s must be an integer seed as a previous run logged it, got %q", crashSeedEnv, v)
	}
	return seed
}

// ledger is the test's own record of what the daemon asked it to do and
// what the daemon confirmed.
type ledger struct {
	mu         sync.Mutex
	dispatched map[string]int  // key -> tools.execute calls
	acked      map[string]bool // key -> a proposal result said succeeded
	answered   []string        // the ids of the proposals answered
	submitted  []string
	// The crash point of the current trial: the crashAt-th tools.execute
	// closes crash; with hold, that call never answers.
	calls   int
	crashAt int
	hold    bool
	crash   chan struct{}
}

// arm sets the crash point of the next trial.
func (l *ledger) arm(at int, hold bool) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls, l.crashAt, l.hold, l.crash = 0, at, hold, make(chan struct{})
	return l.crash
}

// chargeKey is the key k a crash test's tools.execute carries.
func chargeKey(raw json.RawMessage) (string, error) {
	var p protocol.ToolExecuteParams
	if err := json.Unmarshal(raw, &p); err != nil {
		return "", fmt.Errorf("tools.execute params: %w", err)
	}
	key, ok := p.Parameters["k"].(string)
	if !ok {
		return "", fmt.Errorf("tools.execute without a string k: %v", p.Parameters)
	}
	return key, nil
}

func (l *ledger) connect(t *testing.T, d *daemon) *client.Client {
	t.Helper()
	c := d.dial(t)
	c.HandleRequest(protocol.MethodToolsExecute, func(ctx context.Context, raw json.RawMessage) (any, error) {
		key, err := chargeKey(raw)
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		l.dispatched[key]++
		l.calls++
		atCrash := l.calls == l.crashAt
		hold := atCrash && l.hold
		if atCrash {
			close(l.crash)
		}
		l.mu.Unlock()
		if hold {
			<-ctx.Done() // the daemon dies with this call open; Close ends ctx
			return nil, ctx.Err()
		}
		return map[string]any{"charged": key}, nil
	})
	if err := c.Call(ctxT(t), protocol.MethodToolsRegister, []protocol.ToolSchema{{Name: "book_seat", Idempotent: true}}, nil); err != nil {
		t.Fatal(err)
	}
	return c
}

// submitCharges sends one proposal of idempotent charges, one action per
// key, and returns its result, one per key.
func submitCharges(ctx context.Context, c *client.Client, keys []string) (*protocol.ProposalResult, error) {
	actions := make([]any, len(keys))
	for i, k := range keys {
		actions[i] = map[string]any{"id": fmt.Sprint("a", i), "type": "tool_call", "tool": "book_seat", "parameters": map[string]any{"k": k}}
	}
	var res protocol.ProposalResult
	if err := c.Call(ctx, protocol.MethodProposalSubmit, map[string]any{"proposal": map[string]any{"actions": actions}}, &res); err != nil {
		return nil, err
	}
	if len(res.Results) != len(keys) {
		return nil, fmt.Errorf("%d results for %d actions", len(res.Results), len(keys))
	}
	return &res, nil
}

// submit sends one proposal of idempotent charges and records what came back.
func (l *ledger) submit(ctx context.Context, c *client.Client, keys []string) error {
	res, err := submitCharges(ctx, c, keys)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.answered = append(l.answered, res.ProposalID)
	for i, r := range res.Results {
		if r.Status == protocol.StatusSucceeded {
			l.acked[keys[i]] = true
		}
	}
	return nil
}

// crashKillsEnv raises (or lowers) the number of SIGKILLs of a crash test
// from its default, for a soak (make crashtest).
const crashKillsEnv = "CAR_CRASH_KILLS"

// crashKills is the number of SIGKILLs in CAR_CRASH_KILLS, or 12.
func crashKills(t *testing.T) int {
	t.Helper()
	v := os.Getenv(crashKillsEnv)
	if v == "" {
		return 12
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s must be a positive number of SIGKILLs, got %q", crashKillsEnv, v)
	}
	return n
}

func TestCrashNeverRepeatsAnAcknowledgedIdempotentCall(t *testing.T) {
	crashTrials(t, "full")
}

// Under journal_sync = proposal a result is only written, not flushed, when
// its step ends: a SIGKILL keeps it all the same (the kernel holds the
// write), so no acknowledged call runs again either.
func TestCrashJournalSyncProposalNeverRepeatsAnAcknowledgedIdempotentCall(t *testing.T) {
	crashTrials(t, "proposal")
}

// crashTrials SIGKILLs the daemon at random points under idempotent
// proposals, with its idempotency journal under journal_sync mode, then
// re-submits everything: no acknowledged call may have run twice.
func crashTrials(t *testing.T, mode string) {
	if testing.Short() {
		t.Skip("crash trials run the daemon many times")
	}
	seed := crashSeed(t)
	trials := crashKills(t)
	t.Logf("journal_sync %s, seed %d, %d SIGKILLs (replay with %s=%d; %s sets the number)", mode, seed, trials, crashSeedEnv, seed, crashKillsEnv)
	rng := rand.New(rand.NewSource(seed))
	home := t.TempDir()
	env := "CAR_JOURNAL_SYNC=" + mode
	l := &ledger{dispatched: map[string]int{}, acked: map[string]bool{}}
	for trial := 0; trial < trials; trial++ {
		// A random point to crash at: after the n-th tool call of this
		// trial, either while that call is open or racing its answer.
		crash := l.arm(1+rng.Intn(40), rng.Intn(2) == 0)
		d := startDaemon(t, home, env)
		if trial == 0 {
			// Logged before the listening line startDaemon waited for.
			line, _, err := d.logs.wait(ctxT(t), 0, "idempotency journal loaded")
			if err != nil || line["journal_sync"] != mode {
				t.Fatalf("the daemon's idempotency journal: %v, %v; want journal_sync %s", line, err, mode)
			}
		}
		c := l.connect(t, d)
		ctx := ctxT(t)
		done := make(chan error, 1)
		go func() {
			for p := 0; ; p++ {
				keys := make([]string, 1+p%4)
				for i := range keys {
					keys[i] = fmt.Sprintf("t%d-p%d-%d", trial, p, i)
				}
				l.mu.Lock()
				l.submitted = append(l.submitted, keys...)
				l.mu.Unlock()
				if err := l.submit(ctx, c, keys); err != nil {
					done <- err // the daemon died under us, or the deadline passed
					return
				}
			}
		}()
		select {
		case <-crash:
		case err := <-done:
			t.Fatalf("trial %d: submissions stopped before the crash point: %v", trial, err)
		case <-time.After(waitLimit):
			t.Fatalf("trial %d: the crash point never came", trial)
		}
		d.kill(t)
		if err := <-done; err == nil {
			t.Fatalf("trial %d: a submission outlived the daemon", trial)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("trial %d: close the client: %v", trial, err)
		}
		if _, err := journal.Verify(filepath.Join(home, "idempotency.jsonl")); err != nil {
			t.Fatalf("trial %d: the journal does not verify after SIGKILL: %v", trial, err)
		}
	}

	// Restart once more and re-submit everything ever submitted.
	l.arm(0, false)
	d := startDaemon(t, home, env)
	c := l.connect(t, d)
	defer c.Close()
	l.mu.Lock()
	all := append([]string(nil), l.submitted...)
	ackedBefore := map[string]bool{}
	for k := range l.acked {
		ackedBefore[k] = true
	}
	l.mu.Unlock()
	for i := 0; i < len(all); i += 50 {
		end := min(i+50, len(all))
		if err := l.submit(ctxT(t), c, all[i:end]); err != nil {
			t.Fatal(err)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(ackedBefore) == 0 {
		t.Fatal("no result was acknowledged before a crash: the test exercised nothing")
	}
	repeated := 0
	for k := range ackedBefore {
		if n := l.dispatched[k]; n != 1 {
			repeated++
			t.Errorf("key %s: its result reached the client, yet it was dispatched %d times", k, n)
		}
	}
	window := 0
	for _, k := range all {
		if l.dispatched[k] > 1 {
			window++
		}
		if !l.acked[k] {
			t.Errorf("key %s never succeeded, even after the final re-submission", k)
		}
	}
	t.Logf("journal_sync %s: %d SIGKILLs, %d keys, %d acknowledged before a crash, %d of them repeated; %d re-run inside the honest window (ran, not yet journaled)",
		mode, trials, len(all), len(ackedBefore), repeated, window)
}
