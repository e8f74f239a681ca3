//go:build crashtest

package main

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/powerfs"
	"github.com/parslee-ai/car-server/internal/runs"
	"github.com/parslee-ai/car-server/protocol"
)

// The power-loss crash test (make crashtest; not part of make test): the
// daemon runs with CAR_HOME on a file system that keeps only what was made
// durable (internal/powerfs), four streams of idempotent proposals and a
// stream of approvals and rejections and a run recording turns in flight,
// and the power is cut at a random point, again and again. After each cut
// the daemon must start on what the disk kept, and nothing it acknowledged
// may be lost: no acknowledged idempotent call runs again, no acknowledged
// approval or rejection is forgotten, no acknowledged run turn is missing,
// no answered proposal's events are missing from the event log.
// It runs under each journal_sync mode, and counts what each can lose: the
// calls that ran in a proposal not yet answered at the cut, re-submitted,
// that run again.

// crashCutsEnv lowers (or raises) the number of cuts from its default.
const crashCutsEnv = "CAR_CRASH_CUTS"

const defaultCuts = 300

func crashCuts(t *testing.T) int {
	t.Helper()
	v := os.Getenv(crashCutsEnv)
	if v == "" {
		return defaultCuts
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s must be a positive number of power cuts, got %q", crashCutsEnv, v)
	}
	return n
}

// decisions is the test's record of the approvals and rejections the
// daemon acknowledged: each action's deploy number -> approved.
type decisions struct {
	mu    sync.Mutex
	acked map[int]bool
	next  int
}

// deployAction is the action of approval n: a tool that needs an approval
// under the default policy, told apart by its parameters.
func deployAction(n int) map[string]any {
	return map[string]any{"id": fmt.Sprint("d", n), "type": "tool_call", "tool": "deploy_service", "parameters": map[string]any{"env": "prod", "n": n}}
}

// decide approves or rejects new actions until the daemon dies.
func (ds *decisions) decide(ctx context.Context, c *client.Client) {
	for {
		ds.mu.Lock()
		n := ds.next
		ds.next++
		ds.mu.Unlock()
		approve := n%2 == 0
		method := protocol.MethodPermissionReject
		if approve {
			method = protocol.MethodPermissionApprove
		}
		if err := c.Call(ctx, method, map[string]any{"action": deployAction(n), "reason": "power-loss test"}, nil); err != nil {
			return
		}
		ds.mu.Lock()
		ds.acked[n] = approve
		ds.mu.Unlock()
	}
}

// check asks the daemon for the decision on every acknowledged action:
// allow for an approval, deny for a rejection.
func (ds *decisions) check(t *testing.T, c *client.Client, cut int) {
	t.Helper()
	ds.mu.Lock()
	var ns []int
	for n := range ds.acked {
		ns = append(ns, n)
	}
	ds.mu.Unlock()
	for i := 0; i < len(ns); i += 200 {
		batch := ns[i:min(i+200, len(ns))]
		actions := make([]any, len(batch))
		for j, n := range batch {
			actions[j] = deployAction(n)
		}
		var res struct {
			Decisions []struct {
				ActionID string `json:"action_id"`
				Decision string `json:"decision"`
			} `json:"decisions"`
		}
		if err := c.Call(ctxT(t), protocol.MethodPermissionEvaluate, map[string]any{"proposal": map[string]any{"actions": actions}}, &res); err != nil {
			t.Fatalf("cut %d: permission.evaluate: %v", cut, err)
		}
		if len(res.Decisions) != len(batch) {
			t.Fatalf("cut %d: %d decisions for %d actions", cut, len(res.Decisions), len(batch))
		}
		for j, n := range batch {
			want := map[bool]string{true: "allow", false: "deny"}[ds.acked[n]]
			if got := res.Decisions[j].Decision; got != want {
				t.Errorf("cut %d: action %d was acknowledged as %s, and after the power loss it is %s", cut, n, map[bool]string{true: "approved", false: "rejected"}[ds.acked[n]], got)
			}
		}
	}
}

// turns is the test's record of the run turns the daemon acknowledged:
// run id -> turns acknowledged.
type turns struct {
	mu    sync.Mutex
	acked map[string]int
}

// record starts a run and records turns in it, one call each, until the
// daemon dies. c is bound to the agent whose run it is.
func (tr *turns) record(ctx context.Context, c *client.Client) {
	var started struct {
		RunID string `json:"run_id"`
	}
	if c.Call(ctx, protocol.MethodRunsStart, map[string]any{"intent": "power-loss test"}, &started) != nil {
		return
	}
	tr.mu.Lock()
	tr.acked[started.RunID] = 0
	tr.mu.Unlock()
	for i := 0; ; i++ {
		var rec struct {
			OK bool `json:"ok"`
		}
		err := c.Call(ctx, protocol.MethodRunsRecordTurns, map[string]any{"run_id": started.RunID, "turns": []map[string]any{{"prompt": fmt.Sprint("turn ", i)}}}, &rec)
		if err != nil || !rec.OK {
			return
		}
		tr.mu.Lock()
		tr.acked[started.RunID]++
		tr.mu.Unlock()
	}
}

// check reads the trace of every run started, which must hold its
// acknowledged turns.
func (tr *turns) check(t *testing.T, c *client.Client, cut int) {
	t.Helper()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for run, n := range tr.acked {
		var trace struct {
			NotFound bool          `json:"not_found"`
			Records  []runs.Record `json:"records"`
		}
		if err := c.Call(ctxT(t), protocol.MethodRunsGetTrace, map[string]any{"run_id": run}, &trace); err != nil {
			t.Fatalf("cut %d: runs.get_trace: %v", cut, err)
		}
		got := 0
		for _, r := range trace.Records {
			if r.Record == runs.KindTurn {
				got++
			}
		}
		if trace.NotFound || got < n {
			t.Errorf("cut %d: run %s had %d turns acknowledged; after the power loss it holds %d (not found: %v)", cut, run, n, got, trace.NotFound)
		}
	}
}

func TestPowerLossLosesNothingAcknowledged(t *testing.T) {
	powerLoss(t, "full")
}

// Under journal_sync = proposal too, nothing acknowledged is lost; what a
// cut can make run again is the steps of a proposal not yet answered.
func TestPowerLossJournalSyncProposal(t *testing.T) {
	powerLoss(t, "proposal")
}

// powerLoss is the power-loss crash test with the idempotency journal
// under journal_sync mode.
func powerLoss(t *testing.T, mode string) {
	seed := crashSeed(t)
	cuts := crashCuts(t)
	t.Logf("journal_sync %s, seed %d, %d cuts (replay with %s=%d; %s sets the number of cuts)", mode, seed, cuts, crashSeedEnv, seed, crashCutsEnv)
	rng := rand.New(rand.NewSource(seed))
	fs := powerfs.MountForTest(t)
	home := filepath.Join(fs.Dir(), "car") // created by the daemon, durably
	env := []string{"CAR_SERVER_SOCKET=off", "CAR_JOURNAL_SYNC=" + mode}
	l := &ledger{dispatched: map[string]int{}, acked: map[string]bool{}}
	ds := &decisions{acked: map[int]bool{}}
	tr := &turns{acked: map[string]int{}}
	// The agent whose runs record turns: its token, issued before the first
	// start, is on the mount too (and made durable by the cut that follows).
	out, errOut, code := agentsCommand(t, []string{"CAR_HOME=" + home}, "issue-token", "recorder")
	agentToken := strings.TrimSpace(out)
	if code != exitOK || agentToken == "" {
		t.Fatalf("agents issue-token: exit %d %s", code, errOut)
	}
	var (
		restarts, repeats, torn int
		lost                    powerfs.Lost
		ackedBefore             []string            // idempotent keys acknowledged before the last cut
		unanswered              []string            // keys that ran before the last cut in a proposal never answered
		answeredBefore          []string            // proposals answered in the round before the last cut
		rerun                   = map[string]bool{} // of those, the keys that ran again when re-submitted
		window                  int                 // keys that ran unanswered, re-submitted
	)
	losses := []powerfs.Loss{powerfs.LoseAll, powerfs.TearLast, powerfs.KeepSomePages}
	for cut := 0; cut < cuts; cut++ {
		crash := l.arm(1+rng.Intn(60), rng.Intn(2) == 0)
		d := startDaemon(t, home, env...)
		restarts++
		if cut > 0 {
			torn += tornTails(d)
		}
		c := l.connect(t, d)
		// After a cut: what was acknowledged is all there.
		ds.check(t, c, cut)
		host := hostOf(t, d) // a run's trace is the host's to read
		tr.check(t, host, cut)
		// An answered proposal's events were durable before its reply: a
		// sample of the last round's, each from received to finished.
		for _, id := range answeredBefore {
			kinds := map[engine.EventKind]int{}
			for _, e := range proposalEvents(t, host, id) {
				kinds[e.Kind]++
			}
			if kinds[engine.EventProposalReceived] != 1 || kinds[engine.EventProposalFinished] != 1 {
				t.Errorf("cut %d: proposal %s was answered before the power loss, and its events after it are %v", cut, id, kinds)
			}
		}
		host.Close()
		if len(ackedBefore) > 0 {
			// Re-submit the last cut's acknowledged calls and a sample of
			// the older ones: each must come from the idempotency cache.
			sample := ackedBefore
			if len(sample) > 100 {
				rng.Shuffle(len(sample), func(i, j int) { sample[i], sample[j] = sample[j], sample[i] })
				sample = sample[:100]
			}
			for i := 0; i < len(sample); i += 25 {
				if err := l.submit(ctxT(t), c, sample[i:min(i+25, len(sample))]); err != nil {
					t.Fatalf("cut %d: re-submit: %v", cut, err)
				}
			}
			l.mu.Lock()
			for _, k := range sample {
				if rerun[k] {
					continue // ran twice in the window before it was ever acknowledged
				}
				if n := l.dispatched[k]; n != 1 {
					repeats++
					t.Errorf("cut %d: key %s was acknowledged before a power loss, and dispatched %d times", cut, k, n)
				}
			}
			l.mu.Unlock()
		}
		// The calls of the last cut that ran in a proposal never answered:
		// re-submitted, those whose result the cut took run again. That is
		// the window of the mode, counted, not a failure. They dispatch, so
		// the crash point waits until after them.
		l.mu.Lock()
		crashAt := l.crashAt
		l.crashAt = -1
		l.mu.Unlock()
		for i := 0; i < len(unanswered); i += 25 {
			keys := unanswered[i:min(i+25, len(unanswered))]
			if err := l.submit(ctxT(t), c, keys); err != nil {
				t.Fatalf("cut %d: re-submit: %v", cut, err)
			}
			l.mu.Lock()
			for _, k := range keys {
				if l.dispatched[k] > 1 {
					rerun[k] = true
				}
			}
			l.mu.Unlock()
		}
		window += len(unanswered)
		l.mu.Lock()
		l.crashAt = crashAt
		l.mu.Unlock()
		if t.Failed() {
			t.FailNow()
		}
		// The arming counted the re-submissions: count from here.
		l.mu.Lock()
		l.calls = 0
		l.mu.Unlock()

		ctx, cancel := context.WithCancel(ctxT(t))
		var wg sync.WaitGroup
		for s := 0; s < 4; s++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for p := 0; ctx.Err() == nil; p++ {
					keys := make([]string, 1+p%3)
					for i := range keys {
						keys[i] = fmt.Sprintf("c%d-s%d-p%d-%d", cut, s, p, i)
					}
					if l.submit(ctx, c, keys) != nil {
						return // the daemon died under us
					}
				}
			}()
		}
		approver := d.dial(t)
		recorder, err := client.Dial(ctxT(t), "ws://"+d.addr+"/", &client.Options{Token: agentToken, AgentID: "recorder"})
		if err != nil {
			t.Fatalf("cut %d: the agent binds: %v", cut, err)
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			ds.decide(ctx, approver)
		}()
		go func() {
			defer wg.Done()
			tr.record(ctx, recorder)
		}()
		select {
		case <-crash:
		case <-time.After(waitLimit):
			t.Fatalf("cut %d: the crash point never came", cut)
		}
		d.kill(t)
		loss := losses[rng.Intn(len(losses))]
		got, err := fs.Cut(loss, rng)
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		lost.Bytes += got.Bytes
		lost.Entries += got.Entries
		cancel()
		wg.Wait()
		c.Close()
		approver.Close()
		recorder.Close()
		l.mu.Lock()
		ackedBefore = ackedBefore[:0]
		for k := range l.acked {
			ackedBefore = append(ackedBefore, k)
		}
		answeredBefore = answeredBefore[:0]
		for i := len(l.answered) - 1; i >= 0 && len(answeredBefore) < 20; i-- { // the newest, the nearest the cut
			answeredBefore = append(answeredBefore, l.answered[i])
		}
		l.answered = l.answered[:0]
		unanswered = unanswered[:0]
		prefix := fmt.Sprintf("c%d-", cut)
		for k, n := range l.dispatched {
			if n > 0 && !l.acked[k] && strings.HasPrefix(k, prefix) {
				unanswered = append(unanswered, k)
			}
		}
		l.mu.Unlock()
	}
	// A last start on what the last cut kept, and the last check.
	d := startDaemon(t, home, env...)
	restarts++
	c := l.connect(t, d)
	defer c.Close()
	ds.check(t, c, cuts)
	tr.check(t, hostOf(t, d), cuts)
	l.mu.Lock()
	acks := len(l.acked)
	l.mu.Unlock()
	ds.mu.Lock()
	decided := len(ds.acked)
	ds.mu.Unlock()
	tr.mu.Lock()
	turnsAcked := 0
	for _, n := range tr.acked {
		turnsAcked += n
	}
	started := len(tr.acked)
	tr.mu.Unlock()
	if acks == 0 || decided == 0 || turnsAcked == 0 {
		t.Fatalf("nothing was acknowledged (%d calls, %d decisions, %d turns): the test exercised nothing", acks, decided, turnsAcked)
	}
	t.Logf("journal_sync %s: %d cuts, %d restarts; acknowledged: %d idempotent calls, %d approvals and rejections, %d runs started and %d turns recorded; %d repeats of an acknowledged call; calls that ran in a proposal not answered before a cut: %d, of which %d ran again when re-submitted; torn tails recovered: %d; lost to the cuts: %d unsynced bytes, %d unsynced directory entries",
		mode, cuts, restarts, acks, decided, started, turnsAcked, repeats, window, len(rerun), torn, lost.Bytes, lost.Entries)
}

// tornTails counts the torn tails the daemon cut off as it started.
func tornTails(d *daemon) int {
	d.logs.mu.Lock()
	defer d.logs.mu.Unlock()
	n := 0
	for _, line := range d.logs.lines {
		if msg, _ := line["msg"].(string); strings.Contains(msg, "torn tail") {
			n++
		}
	}
	return n
}
