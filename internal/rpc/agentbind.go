package rpc

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/coder/websocket"
	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/internal/fanout"
	"github.com/parslee-ai/car-server/internal/runs"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// Agent identity. session.auth {token, agent_id} binds a connection to an
// agent when token is the agent's own token (minted by the operator with
// car-server agents issue-token; the store keeps only its hash, and is read
// on every bind, so an issue or a revoke is in force at once, on every
// daemon sharing the store). One connection per agent on a daemon:
// per-agent state stays unambiguous. A revoke closes the agent's
// connection here, and, announced on the bus (store.TopicAgentRevoked), on
// every other daemon.

// agentBindings is the daemon's agent → connection map. The zero value is
// ready.
type agentBindings struct {
	mu    sync.Mutex
	conns map[string]*conn
}

// bind makes c the connection of agent; it fails when another holds it.
func (b *agentBindings) bind(agent string, c *conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conns == nil {
		b.conns = map[string]*conn{}
	}
	if cur, ok := b.conns[agent]; ok && cur != c {
		return false
	}
	b.conns[agent] = c
	return true
}

// release drops agent's binding when c holds it.
func (b *agentBindings) release(agent string, c *conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conns[agent] == c {
		delete(b.conns, agent)
	}
}

// holder is the connection bound to agent, if any.
func (b *agentBindings) holder(agent string) *conn {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.conns[agent]
}

// connRuns is a connection's agent binding and run state.
type connRuns struct {
	mu      sync.Mutex
	agent   string                               // bound agent, "" when unbound
	current string                               // the run its proposals are recorded in
	started map[string]bool                      // runs it started: marked incomplete if it goes without completing them
	subs    map[string]*fanout.Queue[runs.Event] // runs.trace.event subscriptions by run id
}

// agentID is the agent the connection is bound to, or "".
func (c *conn) agentID() string {
	c.runs.mu.Lock()
	defer c.runs.mu.Unlock()
	return c.runs.agent
}

// bindAgent answers session.auth {token, agent_id}.
func (c *conn) bindAgent(p protocol.AuthParams, enabled bool) (any, error) {
	if err := runs.CheckID("agent_id", p.AgentID); err != nil {
		return nil, invalidParams("session.auth: %v", err)
	}
	if c.srv.opts.Token != "" && tokenMatches(c.srv.opts.Token, p.Token) {
		c.log.Warn("auth failed: the daemon token was presented with an agent_id", zap.String("agent", p.AgentID))
		return nil, internalError("auth failed: the daemon's token cannot bind an agent; present the agent's own token (car-server agents issue-token %s)", p.AgentID)
	}
	ok := false
	if c.srv.opts.AgentTokens != nil && p.Token != "" {
		var err error
		if ok, err = c.srv.opts.AgentTokens.Verify(c.hctx, p.AgentID, p.Token); err != nil {
			c.log.Error("agent tokens unreadable", zap.Error(err))
			return nil, internalError("auth failed: %v", err)
		}
	}
	if !ok {
		c.log.Warn("auth failed: agent token mismatch", zap.String("agent", p.AgentID))
		return nil, internalError("auth failed: token mismatch for agent '%s'; issue it a token with car-server agents issue-token %s", p.AgentID, p.AgentID)
	}
	c.runs.mu.Lock()
	defer c.runs.mu.Unlock()
	if c.runs.agent != "" && c.runs.agent != p.AgentID {
		return nil, internalError("auth failed: this connection is bound to agent '%s' already; open another connection for '%s'", c.runs.agent, p.AgentID)
	}
	if !c.srv.bound.bind(p.AgentID, c) {
		c.log.Warn("auth failed: agent already attached", zap.String("agent", p.AgentID))
		return nil, internalError("auth failed: agent '%s' is already attached on another connection", p.AgentID)
	}
	c.runs.agent = p.AgentID
	if !c.markAuthed() {
		return nil, errEvicted()
	}
	c.log.Info("authenticated as an agent", zap.String("agent", p.AgentID))
	return protocol.AuthResult{OK: true, AuthEnabled: enabled, AgentID: p.AgentID}, nil
}

// endRuns drops what the connection held when it ends: its agent
// binding, its run subscriptions; runs it started and did not complete are
// marked incomplete after the grace period.
func (c *conn) endRuns() {
	c.runs.mu.Lock()
	agent, started, subs := c.runs.agent, c.runs.started, c.runs.subs
	c.runs.subs = nil
	c.runs.mu.Unlock()
	if agent != "" {
		c.srv.bound.release(agent, c)
	}
	if st := c.srv.opts.Runs; st != nil {
		for id := range started {
			st.Orphan(id, c.id)
		}
		for id := range subs {
			st.Unsubscribe(id, c.id)
		}
	}
	for _, q := range subs {
		q.Close()
	}
}

// agentsRevoke revokes an agent's token and closes its connection (host
// role): what car-server agents revoke asks of a running daemon.
func (c *conn) agentsRevoke(ctx context.Context, params *json.RawMessage) (any, error) {
	if !c.isHost() {
		return nil, hostOnly(protocol.MethodAgentsRevoke)
	}
	agentID, err := stringParam(params, "agent_id")
	if err != nil {
		return nil, err
	}
	revoked := false
	if c.srv.opts.AgentTokens != nil {
		if revoked, err = c.srv.opts.AgentTokens.Revoke(ctx, agentID); err != nil {
			if isUnavailable(err) {
				return nil, storeError("agents.revoke", "the token was not revoked", err)
			}
			return nil, internalError("agents.revoke: %v", err)
		}
	}
	closed := 0
	if c.srv.closeRevoked(agentID) {
		closed = 1
	}
	return map[string]any{"agent_id": agentID, "revoked": revoked, "connections_closed": closed}, nil
}

// closeRevoked closes the connection bound to a revoked agent, if there is
// one here; it reports whether there was.
func (s *Server) closeRevoked(agentID string) bool {
	h := s.bound.holder(agentID)
	if h == nil {
		return false
	}
	h.log.Info("closing the connection of a revoked agent", zap.String("agent", agentID))
	h.goOwned(func() { _ = h.ws.Close(websocket.StatusPolicyViolation, "agent token revoked") })
	return true
}

// followRevokes closes, on this daemon, the connection of an agent whose
// token another daemon (or an operator's command) revoked, until the
// returned function is called.
func (s *Server) followRevokes(bus store.Bus) (stop func()) {
	return bus.Subscribe(store.TopicAgentRevoked, func(payload []byte) {
		if len(payload) == 0 {
			return // a resync: a revoke missed meanwhile refused new binds anyway
		}
		s.closeRevoked(string(payload))
	})
}
