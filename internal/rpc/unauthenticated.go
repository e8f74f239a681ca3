package rpc

import (
	"slices"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"
)

// admitLocked makes room for a newcomer, with s.mu held, so that idle
// sockets never lock out a client about to authenticate, and a client in the
// middle of authenticating is never the one that makes room:
//   - past max_unauthenticated, the oldest silent connection (no byte
//     received yet) older than the eviction grace is closed; when there is
//     none, every unauthenticated connection is authenticating or young (a
//     reconnect storm), and the newcomer is admitted past the cap, which
//     max_connections and auth_timeout still bound;
//   - past max_connections, the oldest silent connection of any age is
//     closed; when there is none, the newcomer is refused.
//
// It reports false when no room can be made.
func (s *Server) admitLocked() bool {
	if len(s.pending) >= s.opts.MaxUnauthenticated {
		s.evictSilentLocked("max_unauthenticated", time.Now().Add(-s.opts.EvictionGrace))
	}
	if len(s.conns)+s.reserved-s.evicted < s.opts.MaxConnections {
		return true
	}
	return s.evictSilentLocked("max_connections", time.Time{})
}

// evictSilentLocked tells the oldest unauthenticated connection that has
// sent nothing and opened before openedBefore (zero: any) to close; it stops
// counting against the limits from now on. It reports whether there was one.
func (s *Server) evictSilentLocked(limit string, openedBefore time.Time) bool {
	i := slices.IndexFunc(s.pending, func(c *conn) bool {
		return !c.spoke.Load() && (openedBefore.IsZero() || c.opened.Before(openedBefore))
	})
	if i < 0 {
		return false
	}
	c := s.pending[i]
	s.pending = slices.Delete(s.pending, i, i+1)
	c.evicted = true
	s.evicted++
	close(c.evict)
	c.log.Warn("closing a silent unauthenticated connection to admit a newer one", zap.String("limit", limit))
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
