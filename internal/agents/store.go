package agents

import (
	"context"
	"encoding/json"
	"time"
)

// PostureStore keeps the per-agent posture policy durably: one JSON
// document, which Postures reads and changes. Postures keeps a copy in
// memory, so a gate never waits on it. The store's backends implement it
// (store.Postures is this interface).
type PostureStore interface {
	// Read returns the document; found is false when none was written.
	Read(ctx context.Context) (doc json.RawMessage, found bool, err error)
	// Update calls change with the current document, holding a lock every
	// writer takes (every daemon and every process), and stores what it
	// returns durably before returning. An error from change stores
	// nothing and is returned as it is.
	Update(ctx context.Context, change func(cur json.RawMessage, found bool) (json.RawMessage, error)) error
	// Watch calls fn, on a goroutine of the store's, whenever the document
	// changed elsewhere or may have (fn then reads it again), until cancel.
	// A store only this process writes never calls it.
	Watch(fn func()) (cancel func())
}

// IssuedAgent is an agent with a token, as agents list shows it (never
// the token). Tenants are the tenants the token admits (Tenants: never
// empty; "" is the default tenant).
type IssuedAgent struct {
	AgentID  string    `json:"agent_id"`
	IssuedAt time.Time `json:"issued_at"`
	Tenants  []string  `json:"tenants"`
}
