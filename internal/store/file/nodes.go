package file

import (
	"context"
	"time"

	"github.com/parslee-ai/car-server/internal/store"
)

// Members is the member list of a daemon alone: itself, alive.
type Members struct {
	self store.Member
}

var _ store.Members = (*Members)(nil)

// NewMembers returns the list of the daemon node, started now.
func NewMembers(node, version string) *Members {
	return &Members{self: store.Member{ID: node, Version: version, StartedAt: time.Now().UTC(), Alive: true}}
}

// List returns this daemon, its heartbeat now: it is the one answering.
func (m *Members) List(context.Context) ([]store.Member, error) {
	self := m.self
	self.LastHeartbeat = time.Now().UTC()
	return []store.Member{self}, nil
}
