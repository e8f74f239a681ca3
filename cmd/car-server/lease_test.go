package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
	"github.com/parslee-ai/car-server/protocol"
)

// leaseCall calls a lease method and returns the lease, or the JSON-RPC
// error with the lease its data carries.
func leaseCall(t *testing.T, c *client.Client, method string, params map[string]any) (protocol.Lease, *jsonrpc2.Error) {
	t.Helper()
	var l protocol.Lease
	err := c.Call(ctxT(t), method, params, &l)
	if err == nil {
		return l, nil
	}
	var rerr *jsonrpc2.Error
	if !errors.As(err, &rerr) {
		t.Fatalf("%s %v: %v", method, params, err)
	}
	if rerr.Data != nil {
		if err := json.Unmarshal(*rerr.Data, &l); err != nil {
			t.Fatalf("%s: the error's data is not a lease: %s", method, *rerr.Data)
		}
	}
	return l, rerr
}

// mustLease is leaseCall that wants a success.
func mustLease(t *testing.T, c *client.Client, method string, params map[string]any) protocol.Lease {
	t.Helper()
	l, rerr := leaseCall(t, c, method, params)
	if rerr != nil {
		t.Fatalf("%s %v: %d %s", method, params, rerr.Code, rerr.Message)
	}
	return l
}

// refused wants method to be refused with code and a message holding want.
func refused(t *testing.T, c *client.Client, method string, params map[string]any, code int64, want string) protocol.Lease {
	t.Helper()
	l, rerr := leaseCall(t, c, method, params)
	if rerr == nil || rerr.Code != code || !strings.Contains(rerr.Message, want) {
		t.Fatalf("%s %v = %+v, %v; want %d naming %q", method, params, l, rerr, code, want)
	}
	return l
}

func holderOf(l protocol.Lease) string {
	if l.Holder == nil {
		return ""
	}
	return *l.Holder
}

// TestLeaseMethodsOverTheWire drives every lease method and every refusal
// through the real daemon (store file): an agent leases its own id, a
// plain client finds it held, renew keeps the epoch, a stale epoch or
// another principal is refused, release lets the next acquire succeed at
// once with the next epoch, and the epoch survives a restart.
func TestLeaseMethodsOverTheWire(t *testing.T) {
	home := t.TempDir()
	env := []string{"CAR_MAX_LEASE_AGENT_ID_BYTES=16", "CAR_LEASE_MIN_TTL=1s", "CAR_LEASE_MAX_TTL=10m"}
	d := startDaemon(t, home, env...)
	out, errOut, code := agentsCommand(t, []string{"CAR_HOME=" + home}, "issue-token", "alice")
	if code != exitOK {
		t.Fatalf("issue-token alice: exit %d %s", code, errOut)
	}
	alice, err := client.Dial(ctxT(t), "ws://"+d.addr+"/", &client.Options{Token: strings.TrimSpace(out), AgentID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	plain := d.dial(t)
	defer plain.Close()
	host := hostOf(t, d)

	st := mustLease(t, alice, protocol.MethodLeaseStatus, map[string]any{"agent_id": "alice"})
	if st.Epoch != 0 || st.Holder != nil || st.ExpiresAtMs != nil {
		t.Fatalf("status of a lease never acquired = %+v", st)
	}
	before := time.Now().UnixMilli()
	a := mustLease(t, alice, protocol.MethodLeaseAcquire, map[string]any{"agent_id": "alice", "ttl_ms": 60000})
	if a.AgentID != "alice" || a.Epoch != 1 || holderOf(a) != "agent alice" || a.ExpiresAtMs == nil || *a.ExpiresAtMs < before+60000 {
		t.Fatalf("acquire = %+v; want agent alice at epoch 1, expiring a minute on", a)
	}
	held := refused(t, plain, protocol.MethodLeaseAcquire, map[string]any{"agent_id": "alice"}, protocol.CodeInternal, "held by agent alice")
	if held.Epoch != 1 || holderOf(held) != "agent alice" {
		t.Fatalf("the held refusal's data = %+v; want agent alice at epoch 1", held)
	}
	r := mustLease(t, alice, protocol.MethodLeaseRenew, map[string]any{"agent_id": "alice", "epoch": 1, "ttl_ms": 120000})
	if r.Epoch != 1 || r.ExpiresAtMs == nil || *r.ExpiresAtMs <= *a.ExpiresAtMs {
		t.Fatalf("renew = %+v; want epoch 1 kept, expiring after %d", r, *a.ExpiresAtMs)
	}
	refused(t, host, protocol.MethodLeaseRenew, map[string]any{"agent_id": "alice", "epoch": 1}, protocol.CodeInternal, "not held at that epoch")
	refused(t, host, protocol.MethodLeaseRelease, map[string]any{"agent_id": "alice", "epoch": 1}, protocol.CodeInternal, "not held at that epoch")
	refused(t, alice, protocol.MethodLeaseRelease, map[string]any{"agent_id": "alice", "epoch": 2}, protocol.CodeInternal, "acquire it again")
	rel := mustLease(t, alice, protocol.MethodLeaseRelease, map[string]any{"agent_id": "alice", "epoch": 1})
	if rel.Epoch != 1 || rel.Holder != nil || rel.ExpiresAtMs != nil {
		t.Fatalf("release = %+v; want free at epoch 1", rel)
	}
	refused(t, alice, protocol.MethodLeaseRenew, map[string]any{"agent_id": "alice", "epoch": 1}, protocol.CodeInternal, "not held at that epoch")
	n := mustLease(t, plain, protocol.MethodLeaseAcquire, map[string]any{"agent_id": "alice"})
	if n.Epoch != 2 || holderOf(n) != "plain client" {
		t.Fatalf("acquire after release = %+v; want the plain client at epoch 2", n)
	}
	h := mustLease(t, host, protocol.MethodLeaseAcquire, map[string]any{"agent_id": "bob"})
	if h.Epoch != 1 || holderOf(h) != "person operator" {
		t.Fatalf("host acquire of bob = %+v; want the operator (the daemon's own host token) at epoch 1", h)
	}

	// Refusals: another agent's id, and each bound.
	for _, m := range []string{protocol.MethodLeaseAcquire, protocol.MethodLeaseStatus} {
		refused(t, alice, m, map[string]any{"agent_id": "bob"}, protocol.CodeApprovalDenied, "may lease only its own agent_id")
	}
	refused(t, alice, protocol.MethodLeaseRenew, map[string]any{"agent_id": "bob", "epoch": 1}, protocol.CodeApprovalDenied, "may lease only its own agent_id")
	refused(t, alice, protocol.MethodLeaseRelease, map[string]any{"agent_id": "bob", "epoch": 1}, protocol.CodeApprovalDenied, "may lease only its own agent_id")
	refused(t, plain, protocol.MethodLeaseAcquire, map[string]any{"agent_id": "carol", "ttl_ms": 999}, protocol.CodeInvalidParams, "lease_min_ttl")
	refused(t, plain, protocol.MethodLeaseAcquire, map[string]any{"agent_id": "carol", "ttl_ms": 600001}, protocol.CodeInvalidParams, "lease_max_ttl")
	refused(t, plain, protocol.MethodLeaseRenew, map[string]any{"agent_id": "alice", "epoch": 2, "ttl_ms": 0}, protocol.CodeInvalidParams, "lease_min_ttl")
	refused(t, plain, protocol.MethodLeaseStatus, map[string]any{"agent_id": strings.Repeat("x", 17)}, protocol.CodeInvalidParams, "max_lease_agent_id_bytes")
	refused(t, plain, protocol.MethodLeaseAcquire, map[string]any{"ttl_ms": 5000}, protocol.CodeInvalidParams, "agent_id")
	refused(t, plain, protocol.MethodLeaseRelease, map[string]any{"agent_id": "alice", "epoch": "one"}, protocol.CodeInvalidParams, "epoch")
	if st := mustLease(t, plain, protocol.MethodLeaseStatus, map[string]any{"agent_id": "carol"}); st.Epoch != 0 {
		t.Fatalf("a refused acquire left carol's lease at %+v", st)
	}

	// The epoch survives a restart; a release then a restart never reuses it.
	alice.Close()
	plain.Close()
	d.stop(t)
	d = startDaemon(t, home, env...)
	plain = d.dial(t)
	defer plain.Close()
	st = mustLease(t, plain, protocol.MethodLeaseStatus, map[string]any{"agent_id": "alice"})
	if st.Epoch != 2 || holderOf(st) != "plain client" {
		t.Fatalf("after a restart, status = %+v; want the plain client at epoch 2", st)
	}
	mustLease(t, plain, protocol.MethodLeaseRelease, map[string]any{"agent_id": "alice", "epoch": 2})
	if n := mustLease(t, plain, protocol.MethodLeaseAcquire, map[string]any{"agent_id": "alice"}); n.Epoch != 3 {
		t.Fatalf("acquire after a restart and a release = %+v; want epoch 3", n)
	}
}

// TestClusterLeaseRaceOfAThousandAcquires: two daemons on one PostgreSQL,
// two connections on each, race acquires of one lease until 1,000 have
// succeeded, each winner releasing at once. Exactly one holder per epoch,
// the epochs won are 1..1000 with none missing, and each connection sees
// its own epochs strictly increasing.
func TestClusterLeaseRaceOfAThousandAcquires(t *testing.T) {
	ds := startCluster(t, pgtest.URL(t), 2)
	const wins = 1000
	var (
		mu     sync.Mutex
		owners = map[uint64]string{}
		wg     sync.WaitGroup
		errs   = make(chan error, 4)
	)
	for w := range 4 {
		c := ds[w%2].dial(t)
		defer c.Close()
		name := fmt.Sprintf("daemon %d, connection %d", w%2, w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last uint64
			for {
				mu.Lock()
				done := len(owners) >= wins
				mu.Unlock()
				if done {
					return
				}
				var l protocol.Lease
				err := c.Call(ctxT(t), protocol.MethodLeaseAcquire, map[string]any{"agent_id": "racer", "ttl_ms": 60000}, &l)
				var rerr *jsonrpc2.Error
				if errors.As(err, &rerr) && strings.Contains(rerr.Message, "the lease is held") {
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("%s: acquire: %w", name, err)
					return
				}
				if l.Epoch <= last {
					errs <- fmt.Errorf("%s: epoch %d after %d", name, l.Epoch, last)
					return
				}
				last = l.Epoch
				mu.Lock()
				prev, dup := owners[l.Epoch]
				if !dup && len(owners) < wins {
					owners[l.Epoch] = name
				}
				mu.Unlock()
				if dup {
					errs <- fmt.Errorf("epoch %d held by both %s and %s", l.Epoch, prev, name)
					return
				}
				if err := c.Call(ctxT(t), protocol.MethodLeaseRelease, map[string]any{"agent_id": "racer", "epoch": l.Epoch}, nil); err != nil {
					errs <- fmt.Errorf("%s: release epoch %d: %w", name, l.Epoch, err)
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
	for e := uint64(1); e <= wins; e++ {
		if _, ok := owners[e]; !ok {
			t.Fatalf("%d epochs won, but epoch %d has no holder", len(owners), e)
		}
	}
	c := ds[1].dial(t)
	defer c.Close()
	st := mustLease(t, c, protocol.MethodLeaseStatus, map[string]any{"agent_id": "racer"})
	if st.Epoch < wins || st.Holder != nil {
		t.Fatalf("after the race, status = %+v; want free at epoch %d or more", st, wins)
	}
}
