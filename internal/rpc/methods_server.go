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
	out := protocol.ServerStatusResult{
		Version:     c.srv.opts.Version,
		Connections: c.srv.ConnectionCount(),
		Runtime:     c.srv.rt.Status(),
		Members:     []protocol.Member{},
	}
	out.Runtime.FeedQueueBytes = c.srv.feedBytes.Load()
	c.srv.mu.Lock()
	out.Listen = append([]string{}, c.srv.tcpAddrs...)
	c.srv.mu.Unlock()
	st := c.srv.opts.Store
	if st == nil {
		return out, nil
	}
	out.Store = st.Kind
	if st.Members == nil {
		return out, nil
	}
	// The status is for operators, who need it most while the store is
	// down: a member list that cannot be read is said, not fatal.
	members, err := st.Members.List(ctx)
	if err != nil {
		out.MembersError = store.Wrap("the member list could not be read", err).Error()
		return out, nil
	}
	if members != nil {
		out.Members = members
	}
	return out, nil
}

func (c *conn) approvalsList(context.Context, *json.RawMessage) (any, error) {
	led := c.srv.rt.Approvals()
	if led == nil {
		return protocol.ApprovalsListResult{Approvals: []approvals.Record{}}, nil
	}
	list := led.List()
	if list == nil {
		list = []approvals.Record{}
	}
	return protocol.ApprovalsListResult{Approvals: list}, nil
}

// serverConnections lists the open connections for the dashboard's roster:
// who is connected, with which role and standing tier, and for a host-role
// caller which principal each authenticated one is.
func (c *conn) serverConnections(context.Context, *json.RawMessage) (any, error) {
	c.srv.mu.Lock()
	conns := make([]*conn, 0, len(c.srv.conns))
	for o := range c.srv.conns {
		conns = append(conns, o)
	}
	c.srv.mu.Unlock()
	list := make([]protocol.ConnectionInfo, 0, len(conns))
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
		info := protocol.ConnectionInfo{ID: o.id, Role: role, Tier: o.sess.Tier().String(), Remote: o.remote}
		if c.isHost() && o.authed.Load() {
			by := o.requester()
			info.Principal, info.AgentID, info.ClientName = by.Principal, by.AgentID, by.ClientName
			if ns := o.memoryNamespace.Load(); ns != nil {
				info.MemoryNamespace = *ns
			}
		}
		list = append(list, info)
	}
	slices.SortFunc(list, func(a, b protocol.ConnectionInfo) int { return strings.Compare(a.ID, b.ID) })
	return protocol.ServerConnectionsResult{Connections: list, Self: c.id}, nil
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
