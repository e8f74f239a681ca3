package file

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/parslee-ai/car-server/internal/journal"
	"github.com/parslee-ai/car-server/internal/store"
)

// Leases are the agents' leases of a single daemon, in a journal: one
// record per change, the last per agent id wins, and a release is a record
// too (never a tombstone), so the epoch survives it, a restart and a
// compaction, and is never handed out twice. Each change is appended and
// fsynced before it returns; the key gate makes the read of the current
// record and the append one step per agent id.
type Leases struct {
	j    *journal.Journal
	gate keyGate
	now  func() time.Time
}

var _ store.Leases = (*Leases)(nil)

// leaseRecord is one journal line: a lease as it stands after a change.
type leaseRecord struct {
	Op        string `json:"op"`
	Key       string `json:"key"`
	Holder    string `json:"holder,omitempty"`
	Epoch     uint64 `json:"epoch"`
	ExpiresMs int64  `json:"expires_at_ms,omitempty"`
}

// OpenLeases replays the lease journal at path.
func OpenLeases(path string, opts ...journal.Option) (*Leases, journal.Report, error) {
	j, rep, err := journal.Open(path, opts...)
	if err != nil {
		return nil, rep, err
	}
	return &Leases{j: j, now: time.Now}, rep, nil
}

// current reads agentID's lease; the caller holds its turn of the gate.
func (l *Leases) current(agentID string) (store.Lease, error) {
	out := store.Lease{AgentID: agentID}
	b, ok := l.j.Get(agentID)
	if !ok {
		return out, nil
	}
	var r leaseRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return out, fmt.Errorf("read the lease of agent %q: the journal's record is corrupt: %w", agentID, err)
	}
	out.Holder, out.Epoch = r.Holder, r.Epoch
	if r.ExpiresMs != 0 {
		out.ExpiresAt = time.UnixMilli(r.ExpiresMs)
	}
	return out, nil
}

// write appends le as agentID's record.
func (l *Leases) write(le store.Lease) error {
	r := leaseRecord{Op: "lease", Key: le.AgentID, Holder: le.Holder, Epoch: le.Epoch}
	if !le.ExpiresAt.IsZero() {
		r.ExpiresMs = le.ExpiresAt.UnixMilli()
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := l.j.Append(b); err != nil {
		return fmt.Errorf("record the lease of agent %q: %w", le.AgentID, err)
	}
	return nil
}

// change runs f on agentID's lease in its turn of the gate and appends
// what f returns when f reports a change.
func (l *Leases) change(ctx context.Context, agentID string, f func(cur store.Lease, now time.Time) (store.Lease, error)) (store.Lease, error) {
	leave, err := l.gate.enter(ctx, agentID)
	if err != nil {
		return store.Lease{AgentID: agentID}, fmt.Errorf("change the lease of agent %q: %w", agentID, err)
	}
	defer leave()
	cur, err := l.current(agentID)
	if err != nil {
		return cur, err
	}
	next, err := f(cur, l.now())
	if err != nil {
		return cur, err
	}
	if err := l.write(next); err != nil {
		return cur, err
	}
	return next, nil
}

// Acquire takes the lease with the next epoch when it is free.
func (l *Leases) Acquire(ctx context.Context, agentID, holder string, ttl time.Duration) (store.Lease, error) {
	return l.change(ctx, agentID, func(cur store.Lease, now time.Time) (store.Lease, error) {
		if cur.HeldAt(now) {
			return cur, fmt.Errorf("acquire the lease of agent %q: %w by %s at epoch %d", agentID, store.ErrLeaseHeld, cur.Holder, cur.Epoch)
		}
		return store.Lease{AgentID: agentID, Holder: holder, Epoch: cur.Epoch + 1, ExpiresAt: now.Add(ttl)}, nil
	})
}

// Renew extends a lease holder holds at epoch, keeping the epoch.
func (l *Leases) Renew(ctx context.Context, agentID, holder string, epoch uint64, ttl time.Duration) (store.Lease, error) {
	return l.change(ctx, agentID, func(cur store.Lease, now time.Time) (store.Lease, error) {
		if !cur.HeldAt(now) || cur.Holder != holder || cur.Epoch != epoch {
			return cur, fmt.Errorf("renew the lease of agent %q at epoch %d: %w", agentID, epoch, store.ErrLeaseLost)
		}
		cur.ExpiresAt = now.Add(ttl)
		return cur, nil
	})
}

// Release frees a lease holder holds at epoch; the epoch stays.
func (l *Leases) Release(ctx context.Context, agentID, holder string, epoch uint64) (store.Lease, error) {
	return l.change(ctx, agentID, func(cur store.Lease, now time.Time) (store.Lease, error) {
		if !cur.HeldAt(now) || cur.Holder != holder || cur.Epoch != epoch {
			return cur, fmt.Errorf("release the lease of agent %q at epoch %d: %w", agentID, epoch, store.ErrLeaseLost)
		}
		return store.Lease{AgentID: agentID, Epoch: cur.Epoch}, nil
	})
}

// Status reads the lease; it never waits on I/O.
func (l *Leases) Status(_ context.Context, agentID string) (store.Lease, error) {
	return l.current(agentID)
}

// Close closes the journal.
func (l *Leases) Close() error { return l.j.Close() }
