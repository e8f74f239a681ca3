package file

import (
	"encoding/json"

	"github.com/parslee-ai/car-server/internal/journal"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// Taint is the taint ledger's journal: one record per tainted key of a
// tenant, a tombstone when its taint is cleared. It survives restarts.
type Taint struct {
	j *journal.Journal
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
	return &Taint{j: j}, rep, nil
}

// Load returns every tainted key, by tenant.
func (t *Taint) Load() map[string]map[string]protocol.TaintEntry {
	out := map[string]map[string]protocol.TaintEntry{}
	t.j.Each(func(_ string, b []byte) {
		var r taintRecord
		if json.Unmarshal(b, &r) != nil || r.Entry == nil {
			return
		}
		if out[r.Tenant] == nil {
			out[r.Tenant] = map[string]protocol.TaintEntry{}
		}
		out[r.Tenant][r.Entry.Key] = *r.Entry
	})
	return out
}

// Put records entries in one durable append.
func (t *Taint) Put(tenant string, entries []protocol.TaintEntry) error {
	recs := make([][]byte, 0, len(entries))
	for i := range entries {
		b, err := json.Marshal(taintRecord{Op: "taint", Key: tenant + "\x00" + entries[i].Key, Tenant: tenant, Entry: &entries[i]})
		if err != nil {
			return err
		}
		recs = append(recs, b)
	}
	if len(recs) == 0 {
		return nil
	}
	return t.j.AppendBatch(recs)
}

// Delete clears keys in one durable append.
func (t *Taint) Delete(tenant string, keys []string) error {
	recs := make([][]byte, 0, len(keys))
	for _, k := range keys {
		if _, ok := t.j.Get(tenant + "\x00" + k); !ok {
			continue
		}
		b, err := json.Marshal(taintRecord{Op: "tombstone", Key: tenant + "\x00" + k, Tenant: tenant})
		if err != nil {
			return err
		}
		recs = append(recs, b)
	}
	if len(recs) == 0 {
		return nil
	}
	return t.j.AppendBatch(recs)
}

// Close closes the journal.
func (t *Taint) Close() error { return t.j.Close() }
