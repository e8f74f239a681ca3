package storetest

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
)

// Supervisor is one recorded supervisor subscription.
type Supervisor struct {
	Node   string
	Conn   string
	Filter json.RawMessage
}

// Supervisors stands in for the shared store's registry of supervisor
// subscriptions: every daemon of a test records its own through For, and
// reads everyone's.
type Supervisors struct {
	mu   sync.Mutex
	rows map[[2]string]json.RawMessage // (node, conn) → filter
	fail error
}

// NewSupervisors returns an empty registry.
func NewSupervisors() *Supervisors {
	return &Supervisors{rows: map[[2]string]json.RawMessage{}}
}

// Fail makes every call fail with err until it is called with nil.
func (s *Supervisors) Fail(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}

// Conns lists the connections recorded for node, sorted.
func (s *Supervisors) Conns(node string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.rows {
		if k[0] == node {
			out = append(out, k[1])
		}
	}
	slices.Sort(out)
	return out
}

// For is the registry as daemon node uses it.
func (s *Supervisors) For(node string) *Member { return &Member{s: s, node: node} }

// Member is one daemon's handle on Supervisors.
type Member struct {
	s    *Supervisors
	node string
}

// Register records conn's subscription on this member.
func (m *Member) Register(_ context.Context, conn string, filter json.RawMessage) error {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	if m.s.fail != nil {
		return m.s.fail
	}
	m.s.rows[[2]string{m.node, conn}] = append(json.RawMessage(nil), filter...)
	return nil
}

// Unregister removes conn's subscription on this member.
func (m *Member) Unregister(_ context.Context, conn string) error {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	if m.s.fail != nil {
		return m.s.fail
	}
	delete(m.s.rows, [2]string{m.node, conn})
	return nil
}

// Rows lists every member's subscriptions, sorted by node and connection.
func (m *Member) Rows(context.Context) ([]Supervisor, error) {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	if m.s.fail != nil {
		return nil, m.s.fail
	}
	out := make([]Supervisor, 0, len(m.s.rows))
	for k, f := range m.s.rows {
		out = append(out, Supervisor{Node: k[0], Conn: k[1], Filter: f})
	}
	slices.SortFunc(out, func(a, b Supervisor) int {
		if c := strings.Compare(a.Node, b.Node); c != 0 {
			return c
		}
		return strings.Compare(a.Conn, b.Conn)
	})
	return out, nil
}
