package rpc

import (
	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/protocol"
)

// needsHandshake refuses a method with -32005 until the connection has
// agreed on the protocol version, unless require_handshake is off. Replies
// to the daemon's own tools.execute requests are responses, not
// requests, and never reach it.
func (c *conn) needsHandshake(method string) error {
	if c.srv.opts.HandshakeOptional || c.negotiated.Load() || protocol.BeforeHandshake[method] {
		return nil
	}
	c.log.Info("request before server.handshake refused", zap.String("method", method))
	return rpcError(protocol.CodeHandshakeMissing,
		"protocol handshake required: send server.handshake {protocol_version: %d} after session.auth and before %s",
		protocol.ProtocolVersion, method)
}
