package rpc

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/parslee-ai/car-server/internal/approvals"
	"github.com/parslee-ai/car-server/internal/openrpc"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// server.status and approvals.list serve the operator CLI (car-server status,
// car-server approvals list); any authenticated client may call them.

func (c *conn) serverStatus(ctx context.Context, _ *json.RawMessage) (any, error) {
	out := map[string]any{
		"version":     c.srv.opts.Version,
		"connections": c.srv.ConnectionCount(),
		"runtime":     c.srv.rt.Status(),
		"members":     []protocol.Member{},
	}
	st := c.srv.opts.Store
	if st == nil {
		return out, nil
	}
	out["store"] = st.Kind
	if st.Members == nil {
		return out, nil
	}
	// The status is for operators, who need it most while the store is
	// down: a member list that cannot be read is said, not fatal.
	members, err := st.Members.List(ctx)
	if err != nil {
		out["members_error"] = store.Wrap("the member list could not be read", err).Error()
		return out, nil
	}
	if members != nil {
		out["members"] = members
	}
	return out, nil
}

func (c *conn) approvalsList(context.Context, *json.RawMessage) (any, error) {
	led := c.srv.rt.Approvals()
	if led == nil {
		return map[string]any{"approvals": []approvals.Record{}}, nil
	}
	list := led.List()
	if list == nil {
		list = []approvals.Record{}
	}
	return map[string]any{"approvals": list}, nil
}

// connectionInfo is one row of server.connections.
type connectionInfo struct {
	ID     string `json:"id"`
	Role   string `json:"role"` // host (the host token), client (the auth token) or unauthenticated
	Tier   string `json:"tier"` // the standing permission tier
	Remote string `json:"remote,omitempty"`
}

// serverConnections lists the open connections for the dashboard's roster:
// who is connected, with which role and standing tier.
func (c *conn) serverConnections(context.Context, *json.RawMessage) (any, error) {
	c.srv.mu.Lock()
	conns := make([]*conn, 0, len(c.srv.conns))
	for o := range c.srv.conns {
		conns = append(conns, o)
	}
	c.srv.mu.Unlock()
	list := make([]connectionInfo, 0, len(conns))
	for _, o := range conns {
		select {
		case <-o.ready: // its session and remote address are set
		default:
			continue
		}
		role := "client"
		switch {
		case o.isHost():
			role = "host"
		case !o.authed.Load():
			role = "unauthenticated"
		}
		list = append(list, connectionInfo{ID: o.id, Role: role, Tier: o.sess.Tier().String(), Remote: o.remote})
	}
	slices.SortFunc(list, func(a, b connectionInfo) int { return strings.Compare(a.ID, b.ID) })
	return map[string]any{"connections": list, "self": c.id}, nil
}

// rpcDiscover answers the OpenRPC document (openrpc.json), as the OpenRPC
// convention has it.
func (c *conn) rpcDiscover(context.Context, *json.RawMessage) (any, error) {
	doc, err := openrpc.Document()
	if err != nil {
		return nil, internalError("build the OpenRPC document: %v", err)
	}
	return json.RawMessage(doc), nil
}
