package storetest

import (
	"context"
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// Open makes an empty backing store for t (a directory, a database) and
// returns how to open a daemon on it. Every call of connect opens daemon
// node over that same backing, so a daemon opened again after it was
// closed is a restart; the suite closes every store it opens.
type Open func(t *testing.T) (connect func(t *testing.T, node string) *store.Store)

// Options says what a backend has and where it differs from the others.
// Each flag names one difference, with the reason, and the suite checks the
// backend's own side of it rather than skipping: a backend that stops
// differing fails until its flag goes. The zero value is the shared
// store's behaviour.
type Options struct {
	// Without names each part of store.Store the backend does not have
	// (by its field name: "Events", "Supervisors", ...), with the reason.
	// A nil part not named here fails the suite, and so does a named part
	// that is not nil.
	Without map[string]string

	// Shared: several daemons may have the backing open at once, each
	// seeing the others' writes (PostgreSQL). Without it the backing
	// belongs to one daemon at a time (the file store's journals), and the
	// cross-daemon tests do not run.
	Shared bool

	// BusListensAtOnce: a subscription hears every publication from the
	// moment Subscribe returns, and says nothing (the file bus is in this
	// process). Without it a subscription listens a moment later and
	// announces it with a resync (a nil payload), as a LISTEN on another
	// connection does; what is published before that may be missed.
	BusListensAtOnce bool

	// LocalClaims: an idempotency claim does not exclude another Begin of
	// the same key while it is held, so two identical calls in flight at
	// once both dispatch (the file cache does not merge in-flight
	// duplicates; store.Idempotency says so). Without it a second Begin
	// waits for the holder's Commit (a hit) or Release (its own claim).
	LocalClaims bool

	// LapseClaim makes the idempotency claim of key held by daemon holder
	// (open, or closed since) lapse at once, as if holder had stalled past
	// its lease, and stops holder renewing its claims. A backend without
	// LocalClaims must have it: the suite takes claims over with it.
	LapseClaim func(t *testing.T, holder *store.Store, key string)

	// StateInMemory: state does not outlive the store (the file store
	// keeps a single daemon's state in its memory; checkpoints are how it
	// is kept). Without it state survives a restart.
	StateInMemory bool
}

// suiteTimeout bounds every wait of the suite; it is a hang guard, not a
// performance assertion.
const suiteTimeout = 10 * time.Second

// Run exercises every part of the store seam that open's backend has, with
// the same assertions for every backend: the approval ledger, idempotency
// claims and results, the messaging ledger, state, the run log, agent tokens
// and postures, the event log, the bus, the member list and the supervisor
// registry. Writes that race (two claimers of one key, two writers of one
// state key, two decisions on one fingerprint, appends to one run) have one
// defined outcome, checked whatever the interleaving.
func Run(t *testing.T, open Open, opts Options) {
	t.Run("Parts", func(t *testing.T) { testParts(t, open, opts) })
	t.Run("Approvals", func(t *testing.T) { testApprovals(t, open, opts) })
	t.Run("ApprovalLimits", func(t *testing.T) { testApprovalLimits(t, open, opts) })
	t.Run("Idempotency", func(t *testing.T) { testIdempotency(t, open, opts) })
	t.Run("Messages", func(t *testing.T) { testMessages(t, open, opts) })
	t.Run("State", func(t *testing.T) { testState(t, open, opts) })
	t.Run("Runs", func(t *testing.T) { testRuns(t, open, opts) })
	t.Run("AgentTokens", func(t *testing.T) { testAgentTokens(t, open, opts) })
	t.Run("Postures", func(t *testing.T) { testPostures(t, open, opts) })
	t.Run("Leases", func(t *testing.T) { testLeases(t, open, opts) })
	t.Run("Events", func(t *testing.T) { testEvents(t, open, opts) })
	t.Run("BusAndMembers", func(t *testing.T) { testBusAndMembers(t, open, opts) })
	t.Run("Supervisors", func(t *testing.T) { testSupervisors(t, open, opts) })
	t.Run("Trajectories", func(t *testing.T) { testTrajectories(t, open, opts) })
	t.Run("Harness", func(t *testing.T) { testHarness(t, open, opts) })
	t.Run("Taint", func(t *testing.T) { testTaint(t, open, opts) })
}

// backing is one test's backing store and the daemons opened on it.
type backing struct {
	t       *testing.T
	connect func(t *testing.T, node string) *store.Store
}

// newBacking makes an empty backing for t.
func newBacking(t *testing.T, open Open) *backing {
	t.Helper()
	return &backing{t: t, connect: open(t)}
}

// daemon is one store opened on a backing.
type daemon struct {
	*store.Store
	t      *testing.T
	once   sync.Once
	closed bool
}

// open opens daemon node on the backing; it is closed when the test ends
// unless the test closed it.
func (b *backing) open(node string) *daemon {
	b.t.Helper()
	d := &daemon{Store: b.connect(b.t, node), t: b.t}
	if d.Store == nil {
		b.t.Fatalf("the backend opened no store for daemon %s", node)
	}
	b.t.Cleanup(d.close)
	return d
}

// close closes the daemon's store once.
func (d *daemon) close() {
	d.once.Do(func() {
		d.closed = true
		if err := d.Store.Close(); err != nil {
			d.t.Errorf("close the store of daemon %s: %v", d.Node, err)
		}
	})
}

// restart closes d and opens its daemon again on the same backing.
func (b *backing) restart(d *daemon) *daemon {
	b.t.Helper()
	node := d.Node
	d.close()
	return b.open(node)
}

// ctx is a context bounded by the suite's hang guard.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), suiteTimeout)
	t.Cleanup(cancel)
	return c
}

// value decodes JSON as the engine decodes values, for a value to store.
func value(t *testing.T, text string) any {
	t.Helper()
	v, err := protocol.DecodeValue([]byte(text))
	if err != nil {
		t.Fatalf("decode %s: %v", text, err)
	}
	return v
}

// sameJSON reports whether a and b hold the same JSON value.
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// partsOf names the parts of st by field name, and whether each is nil.
func partsOf(st *store.Store) map[string]bool {
	return map[string]bool{
		"Approvals":   st.Approvals == nil,
		"Idempotency": st.Idempotency == nil,
		"Messages":    st.Messages == nil,
		"State":       st.State == nil,
		"Events":      st.Events == nil,
		"Bus":         st.Bus == nil,
		"Members":     st.Members == nil,
		"Supervisors": st.Supervisors == nil,
		"Runs":        st.Runs == nil,
		"AgentTokens": st.AgentTokens == nil,
		"Postures":    st.Postures == nil,
		"Leases":      st.Leases == nil,
		"Harness":     st.Harness == nil,
		"Taint":       st.Taint == nil,
	}
}

// has says whether the backend has part; a part it lacks is named in
// Options.Without (testParts checks that).
func has(opts Options, part string) bool {
	_, without := opts.Without[part]
	return !without
}

// testParts: every part is there unless Options.Without names it, with a
// reason; Health is nil-safe and says the store is reachable.
func testParts(t *testing.T, open Open, opts Options) {
	b := newBacking(t, open)
	d := b.open("node-a")
	if d.Node != "node-a" {
		t.Errorf("the store's Node is %q, want the node it was opened as, node-a", d.Node)
	}
	if d.Kind == "" {
		t.Error("the store has no Kind")
	}
	if d.Health == nil || d.Close == nil {
		t.Fatal("the store has no Health or no Close")
	}
	if err := d.Health(); err != nil {
		t.Errorf("a freshly opened store's health: %v", err)
	}
	var missing, present []string
	for part, isNil := range partsOf(d.Store) {
		why, without := opts.Without[part]
		switch {
		case isNil && !without:
			missing = append(missing, part)
		case !isNil && without:
			present = append(present, part)
		case without && strings.TrimSpace(why) == "":
			t.Errorf("Options.Without names %s without a reason", part)
		}
	}
	for part := range opts.Without {
		if _, known := partsOf(d.Store)[part]; !known {
			t.Errorf("Options.Without names %q, which is no part of store.Store", part)
		}
	}
	sort.Strings(missing)
	sort.Strings(present)
	if len(missing) > 0 {
		t.Errorf("the store lacks %v; implement them or name them in Options.Without with the reason", missing)
	}
	if len(present) > 0 {
		t.Errorf("Options.Without names %v, which the store has: drop them from Without", present)
	}
}

// race runs fn(i) for i in [0, n) at once, released together, and waits.
func race(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn(i)
		}()
	}
	close(start)
	wg.Wait()
}

// racers is how many goroutines a race test sets on one shared write.
const racers = 8
