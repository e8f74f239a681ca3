package rpc

import (
	"slices"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"
)

// admitLocked makes room for a newcomer, with s.mu held: past the cap on
// unauthenticated connections, or past max_connections, the oldest
// unauthenticated connection is evicted, so that idle sockets never lock out
// a client about to authenticate. It reports false when no room can be made.
func (s *Server) admitLocked() bool {
	if len(s.pending) >= s.opts.MaxUnauthenticated {
		s.evictOldestLocked("max_unauthenticated")
	}
	if len(s.conns)+s.reserved-s.evicted < s.opts.MaxConnections {
		return true
	}
	return s.evictOldestLocked("max_connections")
}

// evictOldestLocked tells the oldest unauthenticated connection to close;
// it stops counting against the limits from now on.
func (s *Server) evictOldestLocked(limit string) bool {
	if len(s.pending) == 0 {
		return false
	}
	c := s.pending[0]
	s.pending = s.pending[1:]
	c.evicted = true
	s.evicted++
	close(c.evict)
	c.log.Warn("closing an unauthenticated connection to admit a newer one", zap.String("limit", limit))
	return true
}

// addPendingLocked records an unauthenticated connection, newest last.
func (s *Server) addPendingLocked(c *conn) {
	if !c.authed.Load() {
		s.pending = append(s.pending, c)
	}
}

// dropPendingLocked forgets c, authenticated or gone.
func (s *Server) dropPendingLocked(c *conn) {
	if i := slices.Index(s.pending, c); i >= 0 {
		s.pending = slices.Delete(s.pending, i, i+1)
	}
}

// markAuthed authenticates c unless it was evicted meanwhile; it reports
// whether it did.
func (c *conn) markAuthed() bool {
	s := c.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.evicted {
		return false
	}
	s.dropPendingLocked(c)
	c.authed.Store(true)
	c.authOnce.Do(func() { close(c.authDone) })
	return true
}

// expire marks c evicted for its auth timeout unless it authenticated
// meanwhile; it reports whether it did.
func (c *conn) expire() bool {
	s := c.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.authed.Load() || c.evicted {
		return false
	}
	s.dropPendingLocked(c)
	c.evicted = true
	s.evicted++
	return true
}

// errEvicted answers a session.auth that lost the race with an eviction.
func errEvicted() error {
	return internalError("auth failed: this connection was closed to admit a newer one because it stayed unauthenticated; reconnect and send session.auth first")
}

// awaitAuth closes an unauthenticated connection with 1008 when auth_timeout
// passes, or when it is evicted, before session.auth succeeds; it returns
// when the connection authenticates or ends.
func (c *conn) awaitAuth() {
	timer := time.NewTimer(c.srv.opts.AuthTimeout)
	defer timer.Stop()
	select {
	case <-c.authDone:
	case <-c.hctx.Done(): // the connection ended
	case <-c.evict:
		_ = c.ws.Close(websocket.StatusPolicyViolation, "closed to admit a newer connection: send session.auth first")
	case <-timer.C:
		if !c.expire() {
			return
		}
		c.log.Warn("no session.auth within auth_timeout; closing", zap.Duration("auth_timeout", c.srv.opts.AuthTimeout))
		_ = c.ws.Close(websocket.StatusPolicyViolation, "auth timeout: send session.auth first")
	}
}
