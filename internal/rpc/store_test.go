package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/file"
	"github.com/parslee-ai/car-server/protocol"
)

// errDown is what flakyStore answers while it is down, as a database
// store's parts do when they cannot reach it.
var errDown = fmt.Errorf("%w: dial tcp 10.0.0.9:5432: connect: connection refused", store.ErrUnavailable)

// flakyStore is a shared store that can go down and come back: its state
// and idempotency parts fail with errDown while down is set, and its
// claims' commits while commitDown is.
type flakyStore struct {
	*file.State
	down, commitDown atomic.Bool

	mu       sync.Mutex
	results  map[string]any
	commits  int
	releases int
}

func newFlakyStore() *flakyStore {
	return &flakyStore{State: file.NewState(), results: map[string]any{}}
}

func (f *flakyStore) fail() error {
	if f.down.Load() {
		return errDown
	}
	return nil
}

func (f *flakyStore) Get(ctx context.Context, tenant, key string) (any, bool, error) {
	if err := f.fail(); err != nil {
		return nil, false, err
	}
	return f.State.Get(ctx, tenant, key)
}

func (f *flakyStore) Set(ctx context.Context, tenant, key string, value any) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.State.Set(ctx, tenant, key, value)
}

func (f *flakyStore) Write(ctx context.Context, tenant, key string, value any) (uint64, store.Prior, error) {
	if err := f.fail(); err != nil {
		return 0, store.Prior{}, err
	}
	return f.State.Write(ctx, tenant, key, value)
}

func (f *flakyStore) Keys(ctx context.Context, tenant string) ([]string, error) {
	if err := f.fail(); err != nil {
		return nil, err
	}
	return f.State.Keys(ctx, tenant)
}

func (f *flakyStore) Snapshot(ctx context.Context, tenant string) (map[string]any, error) {
	if err := f.fail(); err != nil {
		return nil, err
	}
	return f.State.Snapshot(ctx, tenant)
}

func (f *flakyStore) Begin(_ context.Context, key, _, _ string) (any, bool, store.Claim, error) {
	if err := f.fail(); err != nil {
		return nil, false, nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if out, ok := f.results[key]; ok {
		return out, true, nil, nil
	}
	return nil, false, &flakyClaim{f: f, key: key}, nil
}

func (f *flakyStore) Result(_ context.Context, key string) (any, bool, error) {
	if err := f.fail(); err != nil {
		return nil, false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out, ok := f.results[key]
	return out, ok, nil
}

func (f *flakyStore) Invalidate(_ context.Context, keys []string, _ string) error {
	if err := f.fail(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range keys {
		delete(f.results, k)
	}
	return nil
}

func (f *flakyStore) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.results)
}

func (f *flakyStore) counts() (results, commits, releases int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.results), f.commits, f.releases
}

type flakyClaim struct {
	f   *flakyStore
	key string
}

func (c *flakyClaim) Commit(_ context.Context, out any) error {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	if c.f.commitDown.Load() || c.f.down.Load() {
		return errDown
	}
	c.f.commits++
	c.f.results[c.key] = out
	return nil
}

func (*flakyClaim) Epoch() uint64 { return 1 }

func (c *flakyClaim) Release() {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	c.f.releases++
}

// TestAnUnavailableStoreFailsWhatNeedsItAndNothingElse: while the shared
// store is down, an idempotent action fails saying so and is not run; a
// result that ran but could not be committed is not acknowledged; state
// writes and state.* fail saying so and what to do; a plain tool call still
// runs. When the store is back, everything works again without a restart.
func TestAnUnavailableStoreFailsWhatNeedsItAndNothingElse(t *testing.T) {
	fs := newFlakyStore()
	ts := startRuntime(t, engine.Options{State: fs, Idempotency: fs}, nil)
	var charges atomic.Int32
	tb := newToolbox(t, ts, map[string]toolFunc{
		"book_seat": func(context.Context, protocol.ToolExecuteParams) (any, error) {
			return map[string]any{"charge": charges.Add(1)}, nil
		},
		"echo": echo,
	})
	charge := toolCall("c", "book_seat", map[string]any{"amount": 5}, "idempotent", true)

	fs.down.Store(true)
	res := tb.submit(t, proposal(charge))
	if r := resultOf(t, res, "c"); r.Status != protocol.StatusFailed || !strings.Contains(r.ErrorText(), "the shared store is unavailable") || !strings.Contains(r.ErrorText(), "was not run") {
		t.Fatalf("an idempotent action while the store is down: %s %q", r.Status, r.ErrorText())
	}
	if n := charges.Load(); n != 0 {
		t.Fatalf("an idempotent action ran %d times without a claim", n)
	}
	res = tb.submit(t, proposal(toolCall("e", "echo", map[string]any{"x": 1})))
	if r := resultOf(t, res, "e"); r.Status != protocol.StatusSucceeded {
		t.Fatalf("a plain tool call while the store is down: %s %q", r.Status, r.ErrorText())
	}
	res = tb.submit(t, proposal(stateWrite("w", "k", "v")))
	if r := resultOf(t, res, "w"); r.Status != protocol.StatusFailed || !strings.Contains(r.ErrorText(), "the shared store is unavailable") {
		t.Fatalf("a state_write while the store is down: %s %q", r.Status, r.ErrorText())
	}
	err := tb.Call(ctxT(t), protocol.MethodStateSet, map[string]any{"key": "k", "value": 1}, nil)
	code, msg := rpcCode(t, err)
	if code != protocol.CodeInternal || !strings.Contains(msg, "state.set failed: the shared store is unavailable") || !strings.Contains(msg, "not written") || !strings.Contains(msg, "retry once the store is reachable again") {
		t.Fatalf("state.set while the store is down: %d %q", code, msg)
	}
	err = tb.Call(ctxT(t), protocol.MethodStateGet, map[string]any{"key": "k"}, nil)
	if _, msg := rpcCode(t, err); !strings.Contains(msg, "state.get failed: the shared store is unavailable") {
		t.Fatalf("state.get while the store is down: %q", msg)
	}

	// The store answers, but the commit of the result fails: the tool ran
	// once, its result is not acknowledged, and the claim ended with the
	// failed commit (no release after it).
	fs.down.Store(false)
	fs.commitDown.Store(true)
	res = tb.submit(t, proposal(charge))
	r := resultOf(t, res, "c")
	if r.Status != protocol.StatusFailed || r.Output != nil || !strings.Contains(r.ErrorText(), "could not be committed") || !strings.Contains(r.ErrorText(), "the shared store is unavailable") {
		t.Fatalf("an action whose result could not be committed: %s %v %q", r.Status, r.Output, r.ErrorText())
	}
	if results, commits, releases := fs.counts(); charges.Load() != 1 || results != 0 || commits != 0 || releases != 0 {
		t.Fatalf("after a failed commit: %d runs, %d results, %d commits, %d releases", charges.Load(), results, commits, releases)
	}

	// The store is back: the action runs under a claim, is committed, and
	// a re-submission is a hit.
	fs.commitDown.Store(false)
	first := tb.submit(t, proposal(charge))
	again := tb.submit(t, proposal(charge))
	if a, b := resultOf(t, first, "c"), resultOf(t, again, "c"); a.Status != protocol.StatusSucceeded || b.CacheHit != "idempotency" || !equalJSON(a.Output, b.Output) {
		t.Fatalf("after the store came back: %+v then %+v", a, b)
	}
	if results, commits, _ := fs.counts(); charges.Load() != 2 || results != 1 || commits != 1 {
		t.Fatalf("after the store came back: %d runs, %d results, %d commits", charges.Load(), results, commits)
	}
	mustCall(t, tb, protocol.MethodStateSet, map[string]any{"key": "k", "value": 1}, nil)
	if v, _ := ts.stateValue(t, "", "k"); fmt.Sprint(v) != "1" {
		t.Fatalf("state.set after the store came back: %v", v)
	}
}

// TestAFailedCallReleasesItsClaim: a dispatch that fails gives its claim
// up and stores nothing.
func TestAFailedCallReleasesItsClaim(t *testing.T) {
	fs := newFlakyStore()
	ts := startRuntime(t, engine.Options{State: fs, Idempotency: fs}, nil)
	tb := newToolbox(t, ts, map[string]toolFunc{
		"book_seat": func(context.Context, protocol.ToolExecuteParams) (any, error) {
			return nil, errors.New("card declined")
		},
	})
	res := tb.submit(t, proposal(toolCall("c", "book_seat", map[string]any{}, "idempotent", true)))
	if r := resultOf(t, res, "c"); r.Status != protocol.StatusFailed || !strings.Contains(r.ErrorText(), "card declined") {
		t.Fatalf("%s %q", r.Status, r.ErrorText())
	}
	if results, commits, releases := fs.counts(); results != 0 || commits != 0 || releases != 1 {
		t.Fatalf("a failed call: %d results, %d commits, %d releases; want its claim released", results, commits, releases)
	}
}

// healthz fetches /healthz.
func healthz(t *testing.T, ts *testServer) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodGet, "http"+strings.TrimPrefix(ts.url, "ws")+"healthz", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read /healthz: %v", err)
	}
	return resp.StatusCode, string(body)
}

// TestHealthzNamesAnUnavailableStore: /healthz answers 503 naming the
// store while its Health fails, and 200 ok again once it is back.
func TestHealthzNamesAnUnavailableStore(t *testing.T) {
	var down atomic.Bool
	st := &store.Store{Kind: "postgres", Health: func() error {
		if down.Load() {
			return errDown
		}
		return nil
	}}
	ts := startServer(t, Options{Store: st})
	if code, body := healthz(t, ts); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("healthy: %d %q", code, body)
	}
	down.Store(true)
	code, body := healthz(t, ts)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "postgres store") || !strings.Contains(body, "the shared store is unavailable") {
		t.Fatalf("unhealthy: %d %q", code, body)
	}
	down.Store(false)
	if code, body := healthz(t, ts); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("healthy again: %d %q", code, body)
	}
}

// fixedMembers is a member list, or an error.
type fixedMembers struct {
	list []store.Member
	err  error
}

func (m fixedMembers) List(context.Context) ([]store.Member, error) { return m.list, m.err }

// TestServerStatusListsMembers: server.status names the store and lists
// its members, a dead one included; a list that cannot be read is said,
// and the rest of the status still answers.
func TestServerStatusListsMembers(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	members := []store.Member{
		{ID: "node-a", Version: "1.0.0", StartedAt: now.Add(-time.Hour), LastHeartbeat: now, Alive: true},
		{ID: "node-b", Version: "1.0.0", StartedAt: now.Add(-2 * time.Hour), LastHeartbeat: now.Add(-time.Minute), Alive: false},
	}
	ts := startServer(t, Options{Store: &store.Store{Kind: "postgres", Members: fixedMembers{list: members}}})
	c := ts.dial(t, "")
	var st protocol.ServerStatusResult
	if err := c.Call(ctxT(t), protocol.MethodServerStatus, nil, &st); err != nil {
		t.Fatal(err)
	}
	if st.Store != "postgres" || len(st.Members) != 2 || st.MembersError != "" {
		t.Fatalf("status %+v", st)
	}
	for i, m := range st.Members {
		if m.ID != members[i].ID || m.Alive != members[i].Alive || !m.LastHeartbeat.Equal(members[i].LastHeartbeat) || !m.StartedAt.Equal(members[i].StartedAt) || m.Version != "1.0.0" {
			t.Fatalf("member %d: %+v, want %+v", i, m, members[i])
		}
	}

	ts = startServer(t, Options{Store: &store.Store{Kind: "postgres", Members: fixedMembers{err: errDown}}})
	c = ts.dial(t, "")
	st = protocol.ServerStatusResult{}
	if err := c.Call(ctxT(t), protocol.MethodServerStatus, nil, &st); err != nil {
		t.Fatalf("server.status must answer while the store is down: %v", err)
	}
	if st.Members == nil || len(st.Members) != 0 || !strings.Contains(st.MembersError, "the shared store is unavailable") || st.Version == "" {
		t.Fatalf("status while the store is down: %+v", st)
	}
}
