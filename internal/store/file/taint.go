package file

import (
	"context"
	"encoding/json"

	"github.com/parslee-ai/car-server/internal/journal"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// Taint is the taint ledger of one daemon: a journal with one record per
// tainted key of a tenant and a tombstone when its taint is cleared, and
// the copy in memory that reads answer from. It survives restarts.
type Taint struct {
	j   *journal.Journal
	mem *store.MemoryTaint
}

var _ store.Taint = (*Taint)(nil)

// taintRecord is one journal line.
type taintRecord struct {
	Op     string               `json:"op"`
	Key    string               `json:"key"` // tenant NUL key: the journal's key
	Tenant string               `json:"tenant"`
	Entry  *protocol.TaintEntry `json:"entry,omitempty"`
}

// OpenTaint replays the ledger at path.
func OpenTaint(path string, opts ...journal.Option) (*Taint, journal.Report, error) {
	j, rep, err := journal.Open(path, opts...)
	if err != nil {
		return nil, rep, err
	}
	t := &Taint{j: j, mem: store.NewMemoryTaint()}
	ctx := context.Background()
	j.Each(func(_ string, b []byte) {
		var r taintRecord
		if json.Unmarshal(b, &r) != nil || r.Entry == nil {
			return
		}
		_ = t.mem.Put(ctx, r.Tenant, []protocol.TaintEntry{*r.Entry}) // in memory: cannot fail
	})
	return t, rep, nil
}

// Lookup returns the entries of the tainted keys among keys.
func (t *Taint) Lookup(ctx context.Context, tenant string, keys []string) (map[string]protocol.TaintEntry, error) {
	return t.mem.Lookup(ctx, tenant, keys)
}

// List returns tenant's tainted keys among keys (nil: all), sorted.
func (t *Taint) List(ctx context.Context, tenant string, keys []string) ([]protocol.TaintEntry, error) {
	return t.mem.List(ctx, tenant, keys)
}

// Count returns how many keys are tainted.
func (t *Taint) Count(ctx context.Context) (int, error) { return t.mem.Count(ctx) }

// Put records entries in one durable append.
func (t *Taint) Put(_ context.Context, tenant string, entries []protocol.TaintEntry) error {
	if len(entries) == 0 {
		return nil
	}
	_, err := t.mem.Apply(tenant, entries, nil, func([]string) error {
		recs := make([][]byte, 0, len(entries))
		for i := range entries {
			b, err := json.Marshal(taintRecord{Op: "taint", Key: tenant + "\x00" + entries[i].Key, Tenant: tenant, Entry: &entries[i]})
			if err != nil {
				return err
			}
			recs = append(recs, b)
		}
		return t.j.AppendBatch(recs)
	})
	return err
}

// Delete clears keys in one durable append.
func (t *Taint) Delete(_ context.Context, tenant string, keys []string) ([]string, error) {
	return t.mem.Apply(tenant, nil, keys, func(gone []string) error {
		if len(gone) == 0 {
			return nil
		}
		recs := make([][]byte, 0, len(gone))
		for _, k := range gone {
			b, err := json.Marshal(taintRecord{Op: "tombstone", Key: tenant + "\x00" + k, Tenant: tenant})
			if err != nil {
				return err
			}
			recs = append(recs, b)
		}
		return t.j.AppendBatch(recs)
	})
}

// Close closes the journal.
func (t *Taint) Close() error { return t.j.Close() }
