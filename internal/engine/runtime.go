package engine

import (
	"sync"
)

// Runtime is the one engine a daemon hosts. Its state is shared by every
// connection; tools belong to the session that registered them.
type Runtime struct {
	State *State

	mu       sync.Mutex
	sessions map[string]*Session
}

// NewRuntime returns a Runtime with empty state.
func NewRuntime() *Runtime {
	return &Runtime{State: NewState(), sessions: make(map[string]*Session)}
}

// Session is one connection's view of the Runtime: the tools it registered,
// dispatched back to it.
type Session struct {
	ID    string
	Tools *ToolRegistry
}

// OpenSession creates the session of a new connection.
func (rt *Runtime) OpenSession(id string) *Session {
	s := &Session{ID: id, Tools: NewToolRegistry()}
	rt.mu.Lock()
	rt.sessions[id] = s
	rt.mu.Unlock()
	return s
}

// CloseSession drops everything the session owned.
func (rt *Runtime) CloseSession(s *Session) {
	rt.mu.Lock()
	delete(rt.sessions, s.ID)
	rt.mu.Unlock()
}

// SessionCount is the number of open sessions.
func (rt *Runtime) SessionCount() int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return len(rt.sessions)
}
