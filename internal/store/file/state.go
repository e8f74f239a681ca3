package file

import (
	"context"
	"sort"
	"sync"

	"github.com/parslee-ai/car-server/internal/store"
)

// State is the daemon-wide key/value store of a single daemon, in memory.
// Keys live in namespaces: the unscoped one (tenant "") and one per tenant.
// A namespace never sees another's keys, so tenant isolation does not depend
// on key naming.
//
// Values are decoded JSON (nil, bool, json.Number, string, []any,
// map[string]any) and are treated as immutable once stored. Every write
// stamps the key with a fresh version, so a proposal's rollback can tell
// whether a key still holds its own write (Restore).
//
// It implements store.State; its methods never fail and never block on
// I/O, so the context is not consulted.
type State struct {
	mu      sync.RWMutex
	spaces  map[string]map[string]entry
	version uint64 // the last version stamped; guarded by mu
}

var _ store.State = (*State)(nil)

// entry is a stored value and the version of the write that stored it.
type entry struct {
	value   any
	version uint64
}

// NewState returns an empty store.
func NewState() *State {
	return &State{spaces: make(map[string]map[string]entry)}
}

// Get returns the value at key in tenant's namespace.
func (s *State) Get(_ context.Context, tenant, key string) (any, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.spaces[tenant][key]
	return e.value, ok, nil
}

// Set stores value at key.
func (s *State) Set(ctx context.Context, tenant, key string, value any) error {
	_, _, err := s.Write(ctx, tenant, key, value)
	return err
}

// Write stores value at key and returns the version it stamped and what was
// there before, so the caller can undo exactly this write (Restore).
func (s *State) Write(_ context.Context, tenant, key string, value any) (version uint64, prior store.Prior, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	space := s.spaces[tenant]
	if space == nil {
		space = make(map[string]entry)
		s.spaces[tenant] = space
	}
	old, existed := space[key]
	s.version++
	space[key] = entry{value: value, version: s.version}
	return s.version, store.Prior{Value: old.value, Existed: existed, Version: old.version}, nil
}

// Restore puts prior back at key, but only while key still holds the write
// stamped version: a value someone wrote since then is theirs and stays. It
// reports whether it restored.
func (s *State) Restore(_ context.Context, tenant, key string, version uint64, prior store.Prior) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	space := s.spaces[tenant]
	cur, ok := space[key]
	if !ok || cur.version != version {
		return false, nil
	}
	if prior.Existed {
		space[key] = entry{value: prior.Value, version: prior.Version}
	} else {
		delete(space, key)
	}
	return true, nil
}

// Keys returns the keys of tenant's namespace, sorted.
func (s *State) Keys(_ context.Context, tenant string) ([]string, error) {
	s.mu.RLock()
	keys := make([]string, 0, len(s.spaces[tenant]))
	for k := range s.spaces[tenant] {
		keys = append(keys, k)
	}
	s.mu.RUnlock()
	sort.Strings(keys)
	return keys, nil
}

// Snapshot returns a copy of tenant's namespace.
func (s *State) Snapshot(_ context.Context, tenant string) (map[string]any, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]any, len(s.spaces[tenant]))
	for k, e := range s.spaces[tenant] {
		out[k] = e.value
	}
	return out, nil
}

// Export copies one namespace (tenant non-nil, present even when empty) or
// every namespace that holds a key, for a checkpoint.
func (s *State) Export(_ context.Context, tenant *string) (map[string]map[string]any, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string]map[string]any{}
	for name, space := range s.spaces {
		if tenant != nil && name != *tenant || tenant == nil && len(space) == 0 {
			continue
		}
		copied := make(map[string]any, len(space))
		for k, e := range space {
			copied[k] = e.value
		}
		out[name] = copied
	}
	if tenant != nil && out[*tenant] == nil {
		out[*tenant] = map[string]any{}
	}
	return out, nil
}

// Replace puts a checkpoint's namespaces in place at once: one namespace
// (tenant non-nil) or every one, dropping namespaces the checkpoint does not
// hold. Every key gets a fresh version, so a rollback of a write made before
// the replace can never mistake a restored value for its own. It returns the
// number of keys now held by what it replaced.
func (s *State) Replace(_ context.Context, tenant *string, spaces map[string]map[string]any) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tenant == nil {
		s.spaces = make(map[string]map[string]entry, len(spaces))
	}
	n := 0
	for name, values := range spaces {
		if tenant != nil && name != *tenant {
			continue
		}
		space := make(map[string]entry, len(values))
		for k, v := range values {
			s.version++
			space[k] = entry{value: v, version: s.version}
		}
		s.spaces[name] = space
		n += len(space)
	}
	if tenant != nil && spaces[*tenant] == nil {
		s.spaces[*tenant] = map[string]entry{}
	}
	return n, nil
}
