package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
	"github.com/parslee-ai/car-server/protocol"
)

// The cluster crash test: three daemons share one database, a stream of
// idempotent proposals runs on each at once with keys that overlap across
// the daemons, and at a random point one daemon is SIGKILLed and started
// again on its own state root. The same seed (CAR_CRASH_SEED) deals the same
// victims and crash points again.

const (
	// clusterCrashTrials is how many times a daemon is killed.
	clusterCrashTrials = 50
	// clusterDaemons is how many daemons share the database.
	clusterDaemons = 3
	// clusterClaimLease is the daemons' claim_lease: short, so that the
	// claims a killed daemon held are taken over within the trial.
	clusterClaimLease = "1s"
	// clusterCrashCalls bounds the crash point: the victim dies at its
	// 1st to clusterCrashCalls-th tool call of the trial.
	clusterCrashCalls = 12
	// clusterRecent is how far back a proposal reaches for a key that was
	// already submitted, on any daemon.
	clusterRecent = 6
)

// clusterDispatch is one tools.execute a daemon sent to the test's client.
type clusterDispatch struct {
	id     int // its output carries it, so an ack names the dispatch it acknowledges
	seq    int // its place in the ledger's order
	daemon int // the daemon's slot
	gen    int // the daemon's incarnation in that slot
}

// clusterAck is a succeeded result one daemon returned.
type clusterAck struct {
	seq      int
	daemon   int
	dispatch int // the id in its output
	hit      string
}

// clusterLedger is the test's own record of what the three daemons asked
// its clients to do and what the daemons confirmed.
type clusterLedger struct {
	mu         sync.Mutex
	seq        int
	nextID     int
	dispatches map[string][]clusterDispatch // key -> every dispatch, in ledger order
	acks       map[string][]clusterAck      // key -> every succeeded result
	submitted  map[string]bool
	nextKey    int // keys are k0, k1, …: a fresh key takes the next number
	killed     map[[2]int]bool
	failures   []string // actions that failed on a daemon that was not killed

	// The crash point of the current trial: the crashAt-th tools.execute
	// on the victim's current incarnation closes crash; with hold, that
	// call never answers.
	victim, victimGen int
	calls, crashAt    int
	hold, held        bool
	crash             chan struct{}
}

func newClusterLedger() *clusterLedger {
	return &clusterLedger{
		dispatches: map[string][]clusterDispatch{},
		acks:       map[string][]clusterAck{},
		submitted:  map[string]bool{},
		killed:     map[[2]int]bool{},
		victim:     -1,
	}
}

// arm sets the crash point of the next trial.
func (l *clusterLedger) arm(victim, gen, at int, hold bool) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.victim, l.victimGen, l.calls, l.crashAt, l.hold = victim, gen, 0, at, hold
	l.crash = make(chan struct{})
	return l.crash
}

// clusterMember is one daemon slot: its state root and current incarnation.
type clusterMember struct {
	slot int
	home string
	gen  int
	d    *daemon
	c    *client.Client
	all  []*daemon // every incarnation, for their logs
}

// connect dials the member's current daemon with a client that answers
// tools.execute of the idempotent book_seat, recording every dispatch.
func (l *clusterLedger) connect(t *testing.T, m *clusterMember) {
	t.Helper()
	c := m.d.dial(t)
	slot, gen := m.slot, m.gen
	c.HandleRequest(protocol.MethodToolsExecute, func(ctx context.Context, raw json.RawMessage) (any, error) {
		key, err := chargeKey(raw)
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		id := l.nextID
		l.nextID++
		l.dispatches[key] = append(l.dispatches[key], clusterDispatch{id: id, seq: l.seq, daemon: slot, gen: gen})
		l.seq++
		hold := false
		if slot == l.victim && gen == l.victimGen && l.crashAt > 0 {
			l.calls++
			if l.calls == l.crashAt {
				close(l.crash)
				hold = l.hold
				l.held = l.held || hold
			}
		}
		l.mu.Unlock()
		if hold {
			<-ctx.Done() // the daemon dies with this call open; Close ends ctx
			return nil, ctx.Err()
		}
		return map[string]any{"charged": key, "dispatch": id}, nil
	})
	if err := c.Call(ctxT(t), protocol.MethodToolsRegister, []protocol.ToolSchema{{Name: "book_seat", Idempotent: true}}, nil); err != nil {
		t.Fatal(err)
	}
	m.c = c
}

// pick chooses the keys of one proposal: fresh keys, and keys submitted a
// moment ago on any daemon (running there, or done), so that the same key
// meets its claim, its takeover or its result on another daemon.
func (l *clusterLedger) pick(rng *rand.Rand) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 1 + rng.Intn(4)
	keys := make([]string, 0, n)
	for range n {
		var k string
		if l.nextKey == 0 || rng.Intn(2) == 0 {
			k = fmt.Sprint("k", l.nextKey)
			l.nextKey++
		} else {
			k = fmt.Sprint("k", l.nextKey-1-rng.Intn(min(l.nextKey, clusterRecent)))
		}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		l.submitted[k] = true
	}
	return keys
}

// submit sends one proposal of idempotent charges to the member's daemon
// and records what came back. A call error is returned (the daemon died
// under it, or the deadline passed); an action that did not succeed is
// recorded as a failure.
func (l *clusterLedger) submit(c *client.Client, slot int, keys []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	res, err := submitCharges(ctx, c, keys)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, r := range res.Results {
		if r.Status != protocol.StatusSucceeded {
			l.failures = append(l.failures, fmt.Sprintf("key %s on daemon %d: %s: %s", keys[i], slot, r.Status, r.ErrorText()))
			continue
		}
		out, _ := r.Output.(map[string]any)
		id, ok := out["dispatch"].(float64)
		if !ok || out["charged"] != keys[i] {
			l.failures = append(l.failures, fmt.Sprintf("key %s on daemon %d: succeeded with output %v, not this key's charge", keys[i], slot, r.Output))
			continue
		}
		l.acks[keys[i]] = append(l.acks[keys[i]], clusterAck{seq: l.seq, daemon: slot, dispatch: int(id), hit: r.CacheHit})
		l.seq++
	}
	return nil
}

// stream submits proposals to one daemon until stop closes (it returns nil)
// or a call fails (it returns the error: the daemon died, or worse).
func (l *clusterLedger) stream(c *client.Client, slot int, rng *rand.Rand, stop <-chan struct{}) error {
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		if err := l.submit(c, slot, l.pick(rng)); err != nil {
			return err
		}
	}
}

func TestClusterCrashNeverRepeatsAnAcknowledgedIdempotentCall(t *testing.T) {
	clusterCrash(t)
}

// Under journal_sync = proposal a result's commit does not wait for its
// flush (the proposal's reply does): a daemon's SIGKILL loses nothing
// committed, so the same trials repeat no acknowledged call.
func TestClusterCrashJournalSyncProposalNeverRepeatsAnAcknowledgedIdempotentCall(t *testing.T) {
	clusterCrash(t, "CAR_JOURNAL_SYNC=proposal")
}

// clusterCrash runs the cluster's crash trials with the daemons' settings
// besides the store's in extra.
func clusterCrash(t *testing.T, extra ...string) {
	if testing.Short() {
		t.Skip("crash trials start and kill daemons many times")
	}
	url := pgtest.URL(t)
	seed := crashSeed(t)
	t.Logf("seed %d (replay with %s=%d), settings %v", seed, crashSeedEnv, seed, extra)
	rng := rand.New(rand.NewSource(seed))
	env := append([]string{"CAR_STORE=postgres", "CAR_POSTGRES_URL=" + url, "CAR_CLAIM_LEASE=" + clusterClaimLease}, extra...)
	l := newClusterLedger()
	start := time.Now()

	members := make([]*clusterMember, clusterDaemons)
	for i := range members {
		m := &clusterMember{slot: i, home: t.TempDir()}
		m.d = startDaemon(t, m.home, env...)
		m.all = append(m.all, m.d)
		l.connect(t, m)
		members[i] = m
	}

	// One stream per daemon, for as long as its incarnation lives; each
	// has its own random source, dealt from the seed.
	stop := make(chan struct{})
	done := make([]chan error, clusterDaemons)
	var streams sync.WaitGroup
	run := func(m *clusterMember) {
		ch := make(chan error, 1)
		done[m.slot] = ch
		c, slot, r := m.c, m.slot, rand.New(rand.NewSource(rng.Int63()))
		streams.Add(1)
		go func() {
			defer streams.Done()
			ch <- l.stream(c, slot, r, stop)
		}()
	}
	defer func() {
		// Closed clients fail the streams' calls at once: a test that
		// stops early leaves no stream behind.
		for _, m := range members {
			m.c.Close()
		}
		streams.Wait()
	}()
	for _, m := range members {
		run(m)
	}

	holds := 0
	for trial := range clusterCrashTrials {
		v := members[rng.Intn(clusterDaemons)]
		at, hold := 1+rng.Intn(clusterCrashCalls), rng.Intn(2) == 0
		if hold {
			holds++
		}
		crash := l.arm(v.slot, v.gen, at, hold)
		select {
		case <-crash:
		case err := <-done[v.slot]:
			t.Fatalf("trial %d: daemon %d's submissions stopped before the crash point: %v", trial, v.slot, err)
		case <-time.After(waitLimit):
			t.Fatalf("trial %d: the crash point never came", trial)
		}
		l.mu.Lock()
		l.killed[[2]int{v.slot, v.gen}] = true
		l.mu.Unlock()
		v.d.kill(t)
		if err := <-done[v.slot]; err == nil {
			t.Fatalf("trial %d: a submission outlived daemon %d", trial, v.slot)
		}
		if err := v.c.Close(); err != nil {
			t.Fatalf("trial %d: close the client of daemon %d: %v", trial, v.slot, err)
		}
		for _, m := range members {
			if m == v {
				continue
			}
			select {
			case err := <-done[m.slot]:
				t.Fatalf("trial %d: daemon %d, not killed, failed a submission: %v", trial, m.slot, err)
			default:
			}
		}
		v.gen++
		v.d = startDaemon(t, v.home, env...)
		v.all = append(v.all, v.d)
		l.connect(t, v)
		run(v)
	}
	l.mu.Lock()
	l.victim = -1
	l.mu.Unlock()
	close(stop)
	for _, m := range members {
		if err := <-done[m.slot]; err != nil {
			t.Fatalf("daemon %d failed a submission after the last trial: %v", m.slot, err)
		}
	}
	trialsTook := time.Since(start)

	// Every key ever submitted, submitted again, the three daemons at once:
	// an acknowledged key on a daemon other than the one that ran it, where
	// it must be a hit of the one stored result; a key never acknowledged
	// anywhere, where a claim a killed daemon still holds is taken over.
	l.mu.Lock()
	all := make([]string, 0, len(l.submitted))
	for k := range l.submitted {
		all = append(all, k)
	}
	sort.Strings(all)
	ackedBefore := map[string]bool{}
	again := make([][]string, clusterDaemons)
	for i, k := range all {
		to := i % clusterDaemons
		if acks := l.acks[k]; len(acks) > 0 {
			ackedBefore[k] = true
			for _, d := range l.dispatches[k] {
				if d.id == acks[0].dispatch {
					to = (d.daemon + 1 + rng.Intn(clusterDaemons-1)) % clusterDaemons
				}
			}
		}
		again[to] = append(again[to], k)
	}
	finalFrom := l.seq
	l.mu.Unlock()
	var wg sync.WaitGroup
	errs := make(chan error, clusterDaemons)
	for _, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys := again[m.slot]
			for i := 0; i < len(keys); i += 50 {
				if err := l.submit(m.c, m.slot, keys[i:min(i+50, len(keys))]); err != nil {
					errs <- fmt.Errorf("daemon %d: the final re-submission: %w", m.slot, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, m := range members {
		m.d.stop(t) // its log is then complete
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range l.failures[:min(len(l.failures), 20)] {
		t.Errorf("an action failed on a daemon that lived to answer: %s", f)
	}
	if len(l.failures) > 20 {
		t.Errorf("… and %d more failed actions", len(l.failures)-20)
	}
	var againAfterAck, window, crossHits, acked int
	for _, k := range all {
		acks, ds := l.acks[k], l.dispatches[k]
		if len(acks) == 0 {
			t.Errorf("key %s never succeeded, even after the final re-submission on every daemon", k)
			continue
		}
		if ackedBefore[k] {
			acked++
		}
		// One result, and only one, is ever acknowledged.
		stored := acks[0].dispatch
		for _, a := range acks[1:] {
			if a.dispatch != stored {
				t.Errorf("key %s: daemon %d acknowledged dispatch %d, yet dispatch %d was acknowledged before: two results of one idempotent call", k, a.daemon, a.dispatch, stored)
			}
		}
		var storedBy *clusterDispatch
		for i := range ds {
			if ds[i].id == stored {
				storedBy = &ds[i]
			}
		}
		if storedBy == nil {
			t.Errorf("key %s: the acknowledged dispatch %d never reached a client", k, stored)
			continue
		}
		for _, a := range acks {
			if a.daemon != storedBy.daemon {
				crossHits++
			}
			if ackedBefore[k] && a.seq >= finalFrom && a.hit != "idempotency" {
				t.Errorf("key %s: acknowledged before, then re-submitted on daemon %d, which answered it without a hit of the idempotency cache (%q)", k, a.daemon, a.hit)
			}
		}
		// Nothing is dispatched once a result was acknowledged.
		if last := ds[len(ds)-1]; last.seq > acks[0].seq {
			againAfterAck++
			t.Errorf("key %s: acknowledged (dispatch %d on daemon %d), then dispatched again on daemon %d (incarnation %d): %d dispatches in all",
				k, stored, acks[0].daemon, last.daemon, last.gen, len(ds))
		}
		// Any other dispatch ran on a daemon killed before it could store
		// its result (the honest window), and before the stored one.
		if len(ds) > 1 {
			window++
		}
		for _, d := range ds {
			if d.id == stored {
				continue
			}
			if !l.killed[[2]int{d.daemon, d.gen}] || d.seq > storedBy.seq {
				t.Errorf("key %s: dispatch %d on daemon %d (incarnation %d, killed %v) was not the stored one %d, yet it is no re-run of a killed daemon's call before it",
					k, d.id, d.daemon, d.gen, l.killed[[2]int{d.daemon, d.gen}], stored)
			}
		}
	}

	// The takeovers, from every incarnation's complete log.
	takeovers := 0
	for _, m := range members {
		for _, d := range m.all {
			data, err := os.ReadFile(d.logPath)
			if err != nil {
				t.Fatal(err)
			}
			takeovers += bytes.Count(data, []byte("took over an idempotency claim whose lease lapsed"))
		}
	}
	t.Logf("%d trials (%d with the crash call held open) over %d daemons, %d keys, %d acknowledged before the final re-submission, "+
		"%d acknowledged then dispatched again, %d re-run inside the honest window (ran on a killed daemon, not stored), "+
		"%d claims taken over, %d acknowledgements of a result another daemon dispatched; trials took %s, all %s",
		clusterCrashTrials, holds, clusterDaemons, len(all), acked, againAfterAck, window, takeovers, crossHits,
		trialsTook.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	if acked == 0 || window == 0 || takeovers == 0 || crossHits == 0 {
		t.Errorf("the trials did not exercise the cluster: %d acknowledged, %d re-run, %d taken over, %d cross-daemon hits; each must be above 0", acked, window, takeovers, crossHits)
	}
}
