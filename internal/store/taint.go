package store

import (
	"context"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/parslee-ai/car-server/protocol"
)

// Taint keeps the intent gate's taint ledger: which state keys untrusted
// data reached, by tenant. It is the ledger itself, not a copy: the engine
// asks it at every admission that reads a key, so on a shared backend a
// key tainted on one daemon gates the same read on every other.
type Taint interface {
	// Lookup returns the entries of the tainted keys among keys.
	Lookup(ctx context.Context, tenant string, keys []string) (map[string]protocol.TaintEntry, error)
	// List returns tenant's tainted keys among keys (nil: every one),
	// sorted by key, each once.
	List(ctx context.Context, tenant string, keys []string) ([]protocol.TaintEntry, error)
	// Count returns how many keys are tainted, over every tenant.
	Count(ctx context.Context) (int, error)
	// Put records entries of tenant durably (a key already tainted is
	// replaced).
	Put(ctx context.Context, tenant string, entries []protocol.TaintEntry) error
	// Delete clears keys of tenant durably and returns the ones that were
	// tainted, sorted.
	Delete(ctx context.Context, tenant string, keys []string) ([]string, error)
}

// MemoryTaint is a taint ledger in memory: the engine's when no store keeps
// one, and the file backend's copy of its journal.
type MemoryTaint struct {
	mu   sync.Mutex
	keys map[string]map[string]protocol.TaintEntry
	n    int
}

var _ Taint = (*MemoryTaint)(nil)

// NewMemoryTaint returns an empty ledger.
func NewMemoryTaint() *MemoryTaint {
	return &MemoryTaint{keys: map[string]map[string]protocol.TaintEntry{}}
}

// Lookup returns the entries of the tainted keys among keys.
func (m *MemoryTaint) Lookup(_ context.Context, tenant string, keys []string) (map[string]protocol.TaintEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	space := m.keys[tenant]
	var out map[string]protocol.TaintEntry
	for _, k := range keys {
		if e, ok := space[k]; ok {
			if out == nil {
				out = map[string]protocol.TaintEntry{}
			}
			out[k] = e
		}
	}
	return out, nil
}

// List returns tenant's tainted keys among keys (nil: all), sorted.
func (m *MemoryTaint) List(_ context.Context, tenant string, keys []string) ([]protocol.TaintEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []protocol.TaintEntry{}
	space := m.keys[tenant]
	if keys == nil {
		out = slices.AppendSeq(out, maps.Values(space))
	} else {
		for _, k := range keys {
			if e, ok := space[k]; ok {
				out = append(out, e)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return slices.CompactFunc(out, func(a, b protocol.TaintEntry) bool { return a.Key == b.Key }), nil
}

// Count returns how many keys are tainted.
func (m *MemoryTaint) Count(context.Context) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n, nil
}

// Put records entries.
func (m *MemoryTaint) Put(_ context.Context, tenant string, entries []protocol.TaintEntry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.put(tenant, entries)
	return nil
}

func (m *MemoryTaint) put(tenant string, entries []protocol.TaintEntry) {
	if len(entries) == 0 {
		return
	}
	space := m.keys[tenant]
	if space == nil {
		space = map[string]protocol.TaintEntry{}
		m.keys[tenant] = space
	}
	for _, e := range entries {
		if _, ok := space[e.Key]; !ok {
			m.n++
		}
		space[e.Key] = e
	}
}

// Delete clears keys and returns the ones that were tainted.
func (m *MemoryTaint) Delete(_ context.Context, tenant string, keys []string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.delete(tenant, keys), nil
}

func (m *MemoryTaint) delete(tenant string, keys []string) []string {
	space := m.keys[tenant]
	var gone []string
	for _, k := range keys {
		if _, ok := space[k]; ok {
			delete(space, k)
			m.n--
			gone = append(gone, k)
		}
	}
	if len(space) == 0 {
		delete(m.keys, tenant)
	}
	sort.Strings(gone)
	return gone
}

// Apply changes the ledger under its lock and, in the same critical
// section, calls persist with what changed (the keys that were tainted
// among del); a persist error leaves the ledger as it was. The file
// backend writes its journal this way, so the journal and the copy in
// memory never disagree.
func (m *MemoryTaint) Apply(tenant string, put []protocol.TaintEntry, del []string, persist func(gone []string) error) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	space := m.keys[tenant]
	var gone []string
	for _, k := range del {
		if _, ok := space[k]; ok {
			gone = append(gone, k)
		}
	}
	sort.Strings(gone)
	gone = slices.Compact(gone)
	if err := persist(gone); err != nil {
		return nil, err
	}
	m.delete(tenant, gone)
	m.put(tenant, put)
	return gone, nil
}
