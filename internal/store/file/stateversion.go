package file

import (
	"context"

	"github.com/parslee-ai/car-server/internal/store"
)

var _ store.VersionReader = (*State)(nil)

// GetVersioned returns the value at key and the version of the write that
// stored it.
func (s *State) GetVersioned(_ context.Context, tenant, key string) (any, uint64, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.spaces[tenant][key]
	return e.value, e.version, ok, nil
}
