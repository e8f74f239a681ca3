package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/parslee-ai/car-server/internal/store"
)

// Events is an in-memory durable event log shared by the daemons of a test.
// A record is visible as soon as it is appended (a batch of one), and, with
// a Bus, announced on store.TopicEvents with the writer's node id. A
// record's cluster-wide position is its index plus one. Besides
// store.Events it has what the engine's ClusterLog needs (LastOf, Head) and
// what tests need (Records, Tamper, SetUnavailable).
type Events struct {
	bus store.Bus

	mu          sync.Mutex
	recs        []store.EventRecord
	unavailable bool
}

var _ store.Events = (*Events)(nil)

// NewEvents returns an empty log that announces appends on bus (nil: it
// announces nothing).
func NewEvents(bus store.Bus) *Events { return &Events{bus: bus} }

// Append stores r at once.
func (f *Events) Append(r store.EventRecord) {
	r.Body = slices.Clone(r.Body)
	f.mu.Lock()
	f.recs = append(f.recs, r)
	f.mu.Unlock()
	if f.bus != nil {
		_ = f.bus.Publish(context.Background(), store.TopicEvents, []byte(r.Node))
	}
}

// SetUnavailable makes every read fail as a store that cannot be reached
// does (true), or work again (false). Appends are still kept, as the spool
// would keep them.
func (f *Events) SetUnavailable(down bool) {
	f.mu.Lock()
	f.unavailable = down
	f.mu.Unlock()
}

// check is the error of a read; the caller holds mu.
func (f *Events) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if f.unavailable {
		return fmt.Errorf("read the event log: connection refused: %w", store.ErrUnavailable)
	}
	return nil
}

// Since returns up to limit records after position cursor, of every node
// but skip.
func (f *Events) Since(ctx context.Context, cursor int64, limit int, skip string) ([]store.EventRecord, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(ctx); err != nil {
		return nil, cursor, err
	}
	var out []store.EventRecord
	next := min(max(int(cursor), 0), len(f.recs))
	for ; next < len(f.recs) && (limit <= 0 || len(out) < limit); next++ {
		if skip == "" || f.recs[next].Node != skip {
			out = append(out, f.recs[next])
		}
	}
	return cloneRecords(out), int64(next), nil
}

// Query returns the newest q.Limit matching records (all, for 0), oldest
// first.
func (f *Events) Query(ctx context.Context, q store.EventFilter) ([]store.EventRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(ctx); err != nil {
		return nil, err
	}
	var out []store.EventRecord
	for _, r := range f.recs {
		if len(q.Kinds) > 0 && !slices.Contains(q.Kinds, r.Kind) ||
			q.ProposalID != "" && r.ProposalID != q.ProposalID ||
			q.Node != "" && r.Node != q.Node ||
			!q.Since.IsZero() && r.At.Before(q.Since) ||
			!q.Until.IsZero() && !r.At.Before(q.Until) {
			continue
		}
		out = append(out, r)
	}
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[len(out)-q.Limit:]
	}
	return cloneRecords(out), nil
}

// Count is the number of records.
func (f *Events) Count(ctx context.Context) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(ctx); err != nil {
		return 0, err
	}
	return len(f.recs), nil
}

// LastOf returns the Seq and Hash of node's newest record.
func (f *Events) LastOf(ctx context.Context, node string) (uint64, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(ctx); err != nil {
		return 0, "", err
	}
	for i := len(f.recs) - 1; i >= 0; i-- {
		if f.recs[i].Node == node {
			return f.recs[i].Seq, f.recs[i].Hash, nil
		}
	}
	return 0, "", nil
}

// Head returns the position of the newest record.
func (f *Events) Head(ctx context.Context) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(ctx); err != nil {
		return 0, err
	}
	return int64(len(f.recs)), nil
}

// Records is a copy of every record, in position order.
func (f *Events) Records() []store.EventRecord {
	f.mu.Lock()
	defer f.mu.Unlock()
	return cloneRecords(f.recs)
}

// Tamper edits node's record seq in place, as someone with access to the
// database could; it reports whether there was such a record.
func (f *Events) Tamper(node string, seq uint64, edit func(r *store.EventRecord)) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.recs {
		if f.recs[i].Node == node && f.recs[i].Seq == seq {
			edit(&f.recs[i])
			return true
		}
	}
	return false
}

func cloneRecords(rs []store.EventRecord) []store.EventRecord {
	out := make([]store.EventRecord, len(rs))
	for i, r := range rs {
		r.Body = slices.Clone(r.Body)
		out[i] = r
	}
	return out
}
