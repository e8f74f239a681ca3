package rpc

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"
	"unicode"

	"github.com/sourcegraph/jsonrpc2"
	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/protocol"
)

// NewToken returns a fresh auth token: 32 random bytes, base64url without
// padding (43 characters).
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate auth token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// tokenMatches compares in constant time (for equal lengths).
func tokenMatches(want, got string) bool {
	return subtle.ConstantTimeCompare([]byte(want), []byte(got)) == 1
}

// handleAuth answers session.auth. It runs on the read loop so that a
// client's next frame is judged with the auth decision already made. The
// host token authenticates too, and grants the host role.
func (c *conn) handleAuth(req *jsonrpc2.Request) (any, error) {
	var p protocol.AuthParams
	if err := decodeParams(req.Params, &p, "{token: string, agent_id?: string} or {host_token: string}"); err != nil {
		return nil, err
	}
	if err := c.recordMemoryNamespace(p.MemoryNamespace); err != nil {
		return nil, err
	}
	enabled := c.srv.opts.Token != ""
	if p.AgentID != "" {
		return c.bindAgent(p, enabled)
	}
	if p.HostToken != "" {
		name, err := c.srv.identifyPerson(c.hctx, p.HostToken)
		if err != nil {
			c.log.Warn("auth failed: host token", zap.Error(err))
			return nil, err
		}
		if !c.markAuthed() {
			return nil, errEvicted()
		}
		who := &person{name: name}
		if name != OperatorName {
			who.token = p.HostToken
		}
		c.person.Store(who)
		c.host.Store(true)
		c.log.Info("authenticated with the host role", zap.String("person", name))
		return protocol.AuthResult{OK: true, AuthEnabled: enabled, Role: protocol.RoleHost, Person: name}, nil
	}
	if !enabled {
		if !c.markAuthed() {
			return nil, errEvicted()
		}
		return protocol.AuthResult{OK: true, AuthEnabled: false}, nil
	}
	if !tokenMatches(c.srv.opts.Token, p.Token) {
		c.log.Warn("auth failed: token mismatch")
		return nil, internalError("auth failed: token mismatch; read the current token from the daemon's auth-token file (it changes on every start)")
	}
	if !c.markAuthed() {
		return nil, errEvicted()
	}
	return protocol.AuthResult{OK: true, AuthEnabled: true}, nil
}

// person is who holds a connection's host role: OperatorName for the
// daemon's host token, a name for a token of car-server people, whose
// token is kept to be checked again before each host-role call.
type person struct{ name, token string }

// OperatorName is the person the daemon's own host token stands for.
const OperatorName = "operator"

// personCheckTimeout bounds one look at the people's tokens.
const personCheckTimeout = 5 * time.Second

// identifyPerson names the holder of a host-role token: OperatorName for
// the daemon's host token, a person's name for a token of car-server
// people. Any other token is refused with what to do.
func (s *Server) identifyPerson(ctx context.Context, token string) (string, error) {
	if s.opts.HostToken != "" && tokenMatches(s.opts.HostToken, token) {
		return OperatorName, nil
	}
	if s.opts.People != nil {
		ctx, cancel := context.WithTimeout(ctx, personCheckTimeout)
		defer cancel()
		name, ok, err := s.opts.People.Identify(ctx, token)
		if err != nil {
			return "", internalError("auth failed: the people's tokens could not be read: %v; try again", err)
		}
		if ok {
			return name, nil
		}
	}
	return "", internalError("auth failed: host token mismatch; read the current host token from the daemon's host-token file, beside the auth-token file (it changes on every start), or use your own from car-server people issue-token")
}

// stillHost reports whether a host-role connection still holds the role:
// a person's token is looked up again, so that car-server people revoke
// ends the role at the connection's next host-role call. A revoked
// connection loses the role for good.
func (c *conn) stillHost() bool {
	if !c.isHost() {
		return false
	}
	who := c.person.Load()
	if who == nil || who.token == "" {
		return true
	}
	if name, err := c.srv.identifyPerson(c.hctx, who.token); err == nil && name == who.name {
		return true
	}
	c.host.Store(false)
	c.log.Warn("a person's token was revoked or replaced: the connection lost the host role", zap.String("person", who.name))
	return false
}

// recordMemoryNamespace keeps session.auth's memory_namespace for the
// log and server.connections. It has no effect: this daemon keeps no
// memory. A name a person could not read as is is refused.
func (c *conn) recordMemoryNamespace(ns string) error {
	if ns == "" {
		return nil
	}
	if len(ns) > protocol.MaxClientName || !shownAsIs(ns) {
		return invalidParams("memory_namespace must be at most %d printable bytes (it is recorded, and has no effect: this daemon keeps no memory)", protocol.MaxClientName)
	}
	c.memoryNamespace.Store(&ns)
	c.log.Info("session.auth named a memory namespace; recorded, with no effect (this daemon keeps no memory)", zap.String("memory_namespace", ns))
	return nil
}

// isHost reports whether the connection authenticated with the host token.
func (c *conn) isHost() bool { return c.host.Load() }

// mayApprove refuses a connection that may not record human decisions,
// erase or stop recording, or touch the operator's backups: an agent never
// may, and with approver_role host only host-role connections may, so that
// an agent holding the ordinary token cannot approve its own actions.
func (c *conn) mayApprove(what string) error {
	if c.stillHost() {
		return nil
	}
	if agent := c.agentID(); agent != "" {
		return rpcError(protocol.CodeApprovalDenied,
			"%s needs the host role, and this connection is bound to agent %s, which is governed: a person decides, with session.auth {host_token} read from the daemon's host-token file", what, agent)
	}
	if c.srv.opts.ApproverRole != ApproverHost {
		return nil
	}
	return rpcError(protocol.CodeApprovalDenied,
		"%s needs the host role (approver_role = host): authenticate with session.auth {host_token}, read from the daemon's host-token file", what)
}

// shownAsIs reports whether s is graphic characters and spaces only, so
// that printed on a line it cannot start another line, move the cursor or
// reorder the text around it. (Bytes that are not UTF-8 were decoded as
// U+FFFD, which is graphic.)
func shownAsIs(s string) bool {
	for _, r := range s {
		if !unicode.IsGraphic(r) {
			return false
		}
	}
	return true
}

// handleHandshake answers server.handshake: the exact wire version or -32006.
func (c *conn) handleHandshake(_ context.Context, params *json.RawMessage) (any, error) {
	var p protocol.HandshakeParams
	if params != nil {
		if err := json.Unmarshal(*params, &p); err != nil {
			return nil, rpcError(protocol.CodeVersionMismatch,
				"protocol version mismatch: params must be {protocol_version: %d}", protocol.ProtocolVersion)
		}
	}
	if len(p.ProtocolVersion) == 0 || string(p.ProtocolVersion) == "null" {
		return nil, rpcError(protocol.CodeVersionMismatch,
			"protocol version mismatch: protocol_version is missing; this daemon speaks version %d", protocol.ProtocolVersion)
	}
	var v json.Number
	if p.ProtocolVersion[0] == '"' || json.Unmarshal(p.ProtocolVersion, &v) != nil {
		return nil, rpcError(protocol.CodeVersionMismatch,
			"protocol version mismatch: protocol_version must be a number; this daemon speaks version %d", protocol.ProtocolVersion)
	}
	n, err := v.Int64()
	if err != nil || n != protocol.ProtocolVersion {
		return nil, rpcError(protocol.CodeVersionMismatch,
			"protocol version mismatch: client speaks %s, this daemon speaks version %d", v.String(), protocol.ProtocolVersion)
	}
	if len(p.ClientName) > protocol.MaxClientName {
		return nil, invalidParams("client_name is %d bytes; at most %d name the client to a person", len(p.ClientName), protocol.MaxClientName)
	}
	if !shownAsIs(p.ClientName) {
		return nil, invalidParams("client_name %q has a character that is not printable (a control or format character, or a line break); a person reads it on the approvals this client causes: send plain text", p.ClientName)
	}
	name := p.ClientName
	if name == "" && len(p.ClientVersion) <= protocol.MaxClientName && shownAsIs(p.ClientVersion) {
		name = p.ClientVersion
	}
	c.clientName.Store(&name)
	c.negotiated.Store(true)
	return protocol.HandshakeResult{
		ProtocolVersion:       protocol.ProtocolVersion,
		ServerVersion:         c.srv.opts.Version,
		ClientProtocolVersion: int(n),
	}, nil
}
