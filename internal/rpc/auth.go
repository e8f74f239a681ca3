package rpc

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/sourcegraph/jsonrpc2"

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
// client's next frame is judged with the auth decision already made.
func (c *conn) handleAuth(req *jsonrpc2.Request) (any, error) {
	var p protocol.AuthParams
	if err := decodeParams(req.Params, &p, "{token: string}"); err != nil {
		return nil, err
	}
	if c.srv.opts.Token == "" {
		c.authed.Store(true)
		return protocol.AuthResult{OK: true, AuthEnabled: false}, nil
	}
	if !tokenMatches(c.srv.opts.Token, p.Token) {
		c.log.Warn("auth failed: token mismatch")
		return nil, internalError("auth failed: token mismatch; read the current token from the daemon's auth-token file (it changes on every start)")
	}
	c.authed.Store(true)
	return protocol.AuthResult{OK: true, AuthEnabled: true}, nil
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
	c.negotiated.Store(true)
	return protocol.HandshakeResult{
		ProtocolVersion:       protocol.ProtocolVersion,
		ServerVersion:         c.srv.opts.Version,
		ClientProtocolVersion: int(n),
	}, nil
}
