package engine

import (
	"sort"
	"sync"
)

// State is the daemon-wide key/value store. Keys live in namespaces: the
// unscoped one (tenant "") and one per tenant. A namespace never sees another's
// keys, so tenant isolation does not depend on key naming.
//
// Values are decoded JSON (nil, bool, json.Number, string, []any,
// map[string]any) and are treated as immutable once stored.
type State struct {
	mu     sync.RWMutex
	spaces map[string]map[string]any
}

// NewState returns an empty store.
func NewState() *State {
	return &State{spaces: make(map[string]map[string]any)}
}

// Get returns the value at key in tenant's namespace.
func (s *State) Get(tenant, key string) (any, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, ok := s.spaces[tenant][key]
	return v, ok
}

// Set stores value at key and returns what was there before, so a caller can
// undo the write.
func (s *State) Set(tenant, key string, value any) (prev any, existed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	space := s.spaces[tenant]
	if space == nil {
		space = make(map[string]any)
		s.spaces[tenant] = space
	}
	prev, existed = space[key]
	space[key] = value
	return prev, existed
}

// Delete removes key from tenant's namespace.
func (s *State) Delete(tenant, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.spaces[tenant], key)
}

// Keys returns the keys of tenant's namespace, sorted.
func (s *State) Keys(tenant string) []string {
	s.mu.RLock()
	keys := make([]string, 0, len(s.spaces[tenant]))
	for k := range s.spaces[tenant] {
		keys = append(keys, k)
	}
	s.mu.RUnlock()
	sort.Strings(keys)
	return keys
}

// Snapshot returns a copy of tenant's namespace.
func (s *State) Snapshot(tenant string) map[string]any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]any, len(s.spaces[tenant]))
	for k, v := range s.spaces[tenant] {
		out[k] = v
	}
	return out
}
