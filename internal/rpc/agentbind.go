package rpc

import (
	"context"
	"encoding/json"
	"sync"
	"time"

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
// daemon sharing the store). The token is asked again once the connection
// is bound, so a revoke that lands between the first look and the binding
// is not missed; a connection bound already whose session.auth fails that
// look is closed, as the revoke would close it. One connection per agent on a daemon: per-agent state
// stays unambiguous. The token's tenants bound what the connection may
// reach (tenants.go).
//
// A revoke, and a re-issue (which replaces the token), close the agent's
// connection: the token store's Watch tells the server that a token may
// have changed (the file store when the token file changes, whoever
// changed it; the shared store when any daemon or command announces it),
// and the server asks the store again about every connection it bound
// (Server.recheckAgents) and closes those whose token no longer holds.

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

// all is every bound connection.
func (b *agentBindings) all() []*conn {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]*conn, 0, len(b.conns))
	for _, c := range b.conns {
		out = append(out, c)
	}
	return out
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
	token   string                               // the agent's token it bound with, asked again when the store changes
	tenants []string                             // the tenants that token admits (agents.Tenants)
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
	tenants, err := c.grant(p.AgentID, p.Token)
	if err != nil {
		return nil, err
	}
	c.runs.mu.Lock()
	rebind := c.runs.agent == p.AgentID
	if c.runs.agent != "" && !rebind {
		bound := c.runs.agent
		c.runs.mu.Unlock()
		return nil, internalError("auth failed: this connection is bound to agent '%s' already; open another connection for '%s'", bound, p.AgentID)
	}
	if !c.srv.bound.bind(p.AgentID, c) {
		c.runs.mu.Unlock()
		c.log.Warn("auth failed: agent already attached", zap.String("agent", p.AgentID))
		return nil, internalError("auth failed: agent '%s' is already attached on another connection", p.AgentID)
	}
	c.runs.agent, c.runs.token, c.runs.tenants = p.AgentID, p.Token, tenants
	c.runs.mu.Unlock()
	// Asked again, now that the binding is visible to recheckAgents: a
	// revoke before this look is seen here, one after it by the watch.
	if tenants, err = c.grant(p.AgentID, p.Token); err != nil {
		if rebind {
			// Bound already, and maybe authenticated by that binding
			// alone: dropping it would leave a plain client that never
			// presented the daemon's token. It closes once told why.
			return nil, &closeAfterReply{err: err, agent: p.AgentID}
		}
		c.unbindAgent(p.AgentID)
		return nil, err
	}
	c.runs.mu.Lock()
	c.runs.tenants = tenants
	c.runs.mu.Unlock()
	if !c.markAuthed() {
		return nil, errEvicted()
	}
	c.log.Info("authenticated as an agent", zap.String("agent", p.AgentID))
	return protocol.AuthResult{OK: true, AuthEnabled: enabled, AgentID: p.AgentID}, nil
}

// grant asks the token store whether token is agent's current token, and
// which tenants it admits; a refusal is the auth failure to answer.
func (c *conn) grant(agent, token string) ([]string, error) {
	var tenants []string
	ok := false
	if c.srv.opts.AgentTokens != nil && token != "" {
		var err error
		if tenants, ok, err = c.srv.opts.AgentTokens.Grant(c.hctx, agent, token); err != nil {
			c.log.Error("agent tokens unreadable", zap.Error(err))
			return nil, internalError("auth failed: %v", err)
		}
	}
	if !ok {
		c.log.Warn("auth failed: agent token mismatch", zap.String("agent", agent))
		return nil, internalError("auth failed: token mismatch for agent '%s'; issue it a token with car-server agents issue-token %s", agent, agent)
	}
	return tenants, nil
}

// closeAfterReply is a session.auth refusal after which the connection,
// bound to agent, is closed as a revoked agent's is.
type closeAfterReply struct {
	err   error
	agent string
}

func (e *closeAfterReply) Error() string { return e.err.Error() }
func (e *closeAfterReply) Unwrap() error { return e.err }

// unbindAgent undoes a binding to agent whose token failed the second look.
func (c *conn) unbindAgent(agent string) {
	c.runs.mu.Lock()
	if c.runs.agent == agent {
		c.runs.agent, c.runs.token, c.runs.tenants = "", "", nil
	}
	c.runs.mu.Unlock()
	c.srv.bound.release(agent, c)
}

// boundToken is the agent the connection is bound to and the token it
// bound with ("" and "" when unbound).
func (c *conn) boundToken() (agent, token string) {
	c.runs.mu.Lock()
	defer c.runs.mu.Unlock()
	return c.runs.agent, c.runs.token
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
	// The holder is taken before the revoke: once the token is gone the
	// watch may close the connection first, and it still counts here.
	holder := c.srv.bound.holder(agentID)
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
	if holder != nil {
		holder.closeRevoked(agentID)
		closed = 1
	}
	return map[string]any{"agent_id": agentID, "revoked": revoked, "connections_closed": closed}, nil
}

// closeRevoked closes the connection of an agent whose token no longer
// holds.
func (c *conn) closeRevoked(agentID string) {
	c.log.Info("closing the connection of a revoked agent", zap.String("agent", agentID))
	// The agent is free before its client sees the close, so that a client
	// reconnecting at once with its new token is not told the agent is
	// still attached.
	c.srv.bound.release(agentID, c)
	c.goOwned(func() { _ = c.ws.Close(websocket.StatusPolicyViolation, "agent token revoked") })
}

// watchTokens follows the token store's changes until the returned
// function is called: each change wakes one goroutine of the server's,
// which asks the store again about the bound connections
// (recheckAgents), so the store's own goroutine never waits on it.
func (s *Server) watchTokens(tokens store.AgentTokens) (stop func()) {
	var mu sync.Mutex
	pending := map[string]bool{} // agents to ask about; "" is every bound agent
	wake := make(chan struct{}, 1)
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-wake:
			}
			mu.Lock()
			agents := pending
			pending = map[string]bool{}
			mu.Unlock()
			s.recheckAgents(agents)
		}
	}()
	cancel := tokens.Watch(func(agentID string) {
		mu.Lock()
		pending[agentID] = true
		mu.Unlock()
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	return func() {
		cancel()
		close(quit)
		<-done
	}
}

// recheckAgents asks the token store again about the connections bound to
// the agents named ("" names every one) and closes each whose token was
// revoked or replaced. A store that cannot answer closes nothing: the
// next change asks again, and no new bind succeeds meanwhile.
func (s *Server) recheckAgents(agents map[string]bool) {
	s.recheckMCP(agents)
	var conns []*conn
	if agents[""] {
		conns = s.bound.all()
	} else {
		for a := range agents {
			if h := s.bound.holder(a); h != nil {
				conns = append(conns, h)
			}
		}
	}
	for _, h := range conns {
		agent, token := h.boundToken()
		if agent == "" {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), tokenRecheckTimeout)
		_, ok, err := s.opts.AgentTokens.Grant(ctx, agent, token)
		cancel()
		switch {
		case err != nil:
			h.log.Warn("could not ask the token store about a bound agent", zap.String("agent", agent), zap.Error(err))
		case !ok:
			h.closeRevoked(agent)
		}
	}
}

// tokenRecheckTimeout bounds one question recheckAgents asks the store.
const tokenRecheckTimeout = 10 * time.Second
