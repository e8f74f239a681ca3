package rpc

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/protocol"
)

// capabilitiesSet narrows this connection's capabilities. Widening them
// needs the host role; anyone else opens a new connection.
func (c *conn) capabilitiesSet(_ context.Context, params *json.RawMessage) (any, error) {
	var p protocol.CapabilitiesSetParams
	if err := decodeParams(params, &p, "{tools?: string[], state_keys?: string[], max_actions?: number}"); err != nil {
		return nil, err
	}
	next, err := c.sess.SetCapabilities(engine.Capabilities{Tools: p.Tools, StateKeys: p.StateKeys, MaxActions: p.MaxActions}, c.isHost())
	if errors.Is(err, engine.ErrWidening) {
		return nil, rpcError(protocol.CodeApprovalDenied, "%v: a connection may only narrow its own capabilities; widening needs the host role (session.auth {host_token}) or a new connection", err)
	}
	if err != nil {
		return nil, invalidParams("session.capabilities.set: %v", err)
	}
	return capabilitySet(&next), nil
}

func (c *conn) capabilitiesGet(context.Context, *json.RawMessage) (any, error) {
	return capabilitySet(c.sess.Capabilities()), nil
}

// capabilitySet is the wire form of the set in force (nil: unrestricted).
func capabilitySet(caps *engine.Capabilities) protocol.CapabilitySet {
	if caps == nil {
		return protocol.CapabilitySet{}
	}
	return protocol.CapabilitySet{Tools: caps.Tools, StateKeys: caps.StateKeys, MaxActions: caps.MaxActions}
}

// stateKeyAllowed holds the state methods to the capability set too, so a
// restricted connection cannot reach around its proposals.
func (c *conn) stateKeyAllowed(key string) error {
	if err := c.sess.Capabilities().AllowsKey(key); err != nil {
		return rpcError(protocol.CodeApprovalDenied, "%v", err)
	}
	return nil
}

// visibleKeys drops the keys outside the capability set from a listing.
func (c *conn) visibleKeys(keys []string) []string {
	caps := c.sess.Capabilities()
	out := keys[:0:0]
	for _, k := range keys {
		if caps.AllowsKey(k) == nil {
			out = append(out, k)
		}
	}
	return out
}
