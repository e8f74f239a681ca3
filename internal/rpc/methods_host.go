package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"time"

	"github.com/parslee-ai/car-server/internal/approvals"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/fanout"
	"github.com/parslee-ai/car-server/internal/host"
	"github.com/parslee-ai/car-server/protocol"
)

// The host.* methods: the registry lives in internal/host; here are the
// wire shapes, the ownership errors as JSON-RPC errors, the approver role,
// and the host.event feed of each subscribed connection.

func (c *conn) hostSubscribe(context.Context, *json.RawMessage) (any, error) {
	snap := c.srv.host.Subscribe(c.id, c.mayApprove("") == nil, c.hostFeed().Push)
	return protocol.HostSnapshot{
		Subscribed: true,
		Agents:     snap.Agents,
		Approvals:  snap.Approvals,
		Events:     snap.Events,
		Devices:    []any{}, // upstream's linked devices: none here
		Identity:   c.srv.identity(c),
	}, nil
}

func (c *conn) hostUnsubscribe(context.Context, *json.RawMessage) (any, error) {
	return protocol.SubscriptionResult{WasSubscribed: c.srv.host.Unsubscribe(c.id)}, nil
}

// identity describes this daemon to a host.
func (s *Server) identity(c *conn) protocol.HostIdentity {
	id := protocol.HostIdentity{
		Version:      s.opts.Version,
		PID:          os.Getpid(),
		Home:         s.opts.Home,
		StartedAt:    s.started.UTC().Format(time.RFC3339),
		ApproverRole: s.opts.ApproverRole,
	}
	if c.isHost() {
		id.Role = protocol.RoleHost
	}
	return id
}

// hostFeed is this connection's host.event queue, made on first use; run
// closes it when the connection ends. Each notice carries its place in the
// feed; dropped > 0 says the subscriber fell behind.
func (c *conn) hostFeed() *fanout.Queue[host.Event] {
	return feed(c, &c.hostEvents, func(ctx context.Context, it fanout.Item[host.Event]) error {
		return c.notify(ctx, protocol.MethodHostEvent, protocol.HostEventNotice{HostEventEntry: it.Value, Cursor: it.Cursor, Dropped: it.Dropped})
	})
}

func (c *conn) hostAgents(context.Context, *json.RawMessage) (any, error) {
	return c.srv.host.Agents(), nil
}

func (c *conn) hostApprovals(context.Context, *json.RawMessage) (any, error) {
	return protocol.HostApprovalsResult{Approvals: c.srv.host.Approvals()}, nil
}

func (c *conn) hostEventsList(_ context.Context, params *json.RawMessage) (any, error) {
	var p protocol.HostEventsParams
	if err := optionalParams(params, &p, "{limit?: number (default 100)}"); err != nil {
		return nil, err
	}
	if p.Limit < 0 {
		return nil, invalidParams("param 'limit' must be 0 or more (0 or absent: the newest 100)")
	}
	return protocol.HostEventsResult{Events: c.srv.host.Events(p.Limit)}, nil
}

func (c *conn) hostRegisterAgent(_ context.Context, params *json.RawMessage) (any, error) {
	if err := paramsWithin(params, protocol.MethodHostRegisterAgent, c.srv.opts.MaxContextBytes, "max_context_bytes", "its metadata"); err != nil {
		return nil, err
	}
	var p host.AgentRequest
	if err := decodeParams(params, &p, "{id?: string, name: string, kind: string, capabilities?: string[], project?: string, pid?: number, display?: object, metadata?: object}"); err != nil {
		return nil, err
	}
	a, err := c.srv.host.RegisterAgent(c.id, p)
	return hostReply(a, err)
}

func (c *conn) hostUnregisterAgent(_ context.Context, params *json.RawMessage) (any, error) {
	agentID, err := stringParam(params, "agent_id")
	if err != nil {
		return nil, err
	}
	if err := c.srv.host.UnregisterAgent(c.id, agentID); err != nil {
		return hostReply(nil, err)
	}
	return protocol.OKResult{OK: true}, nil
}

func (c *conn) hostSetStatus(_ context.Context, params *json.RawMessage) (any, error) {
	if err := paramsWithin(params, protocol.MethodHostSetStatus, c.srv.opts.MaxNotifyBytes, "max_notify_bytes", "its payload"); err != nil {
		return nil, err
	}
	var p host.StatusRequest
	const shape = "{agent_id: string, status: idle|running|waiting_for_approval|paused|completed|errored|stopped, current_task?: string, message?: string, payload?: object}"
	if err := decodeParams(params, &p, shape); err != nil {
		return nil, err
	}
	if err := requireString("agent_id", p.AgentID, shape); err != nil {
		return nil, err
	}
	a, err := c.srv.host.SetStatus(c.id, p)
	return hostReply(a, err)
}

func (c *conn) hostNotify(_ context.Context, params *json.RawMessage) (any, error) {
	if err := paramsWithin(params, protocol.MethodHostNotify, c.srv.opts.MaxNotifyBytes, "max_notify_bytes", "its payload"); err != nil {
		return nil, err
	}
	var p host.NotifyRequest
	if err := optionalParams(params, &p, "{kind?: string, agent_id?: string, message?: string, payload?: object}"); err != nil {
		return nil, err
	}
	return c.srv.host.Notify(c.id, p), nil
}

func (c *conn) hostRequestApproval(_ context.Context, params *json.RawMessage) (any, error) {
	if err := paramsWithin(params, protocol.MethodHostRequestApproval, c.srv.opts.MaxContextBytes, "max_context_bytes", "its context"); err != nil {
		return nil, err
	}
	var p host.ApprovalRequest
	const shape = "{agent_id?: string, title: string, description?: string, context?: object, required_approvals?: number}"
	if err := decodeParams(params, &p, shape); err != nil {
		return nil, err
	}
	if err := requireString("title", p.Title, shape); err != nil {
		return nil, err
	}
	a, err := c.srv.host.RequestApprovalBy(c.requester(), p)
	return hostReply(a, err)
}

// requester is who this connection is on the approvals it causes: its
// principal, its agent, and the name its client gave in server.handshake.
func (c *conn) requester() host.Requester {
	by := host.Requester{Principal: protocol.PrincipalPlain, Connection: c.id}
	switch {
	case c.isHost():
		by.Principal = protocol.PrincipalHost
	case c.agentID() != "":
		by.Principal, by.AgentID = protocol.PrincipalAgent, c.agentID()
	}
	if name := c.clientName.Load(); name != nil {
		by.ClientName = *name
	}
	return by
}

// hostResolveApproval decides a host approval through the engine's one
// decision path: one the permission gate raised is decided on the durable
// ledger first, at the tier its operation needs, with the reviewer stamped
// here, and that record is what releases the parked proposal. Every
// connection may answer (or withdraw) a request it raised itself with
// host.request_approval; anything else is a decision, for the approver role.
func (c *conn) hostResolveApproval(_ context.Context, params *json.RawMessage) (any, error) {
	var p protocol.HostResolveParams
	const shape = "{approval_id: string, approved: boolean, notes?: string, expires_in?: seconds, uses?: integer}"
	if err := decodeParams(params, &p, shape); err != nil {
		return nil, err
	}
	if err := requireString("approval_id", p.ApprovalID, shape); err != nil {
		return nil, err
	}
	if p.Approved == nil {
		return nil, invalidParams("param 'approved' is required: expected %s", shape)
	}
	if err := approvals.CheckLimits(p.Limits, *p.Approved); err != nil {
		return nil, invalidParams("%v", err)
	}
	if a, ok := c.srv.host.Approval(p.ApprovalID); !ok || a.ClientID != c.id {
		if err := c.mayApprove("host.resolve_approval of an approval this connection did not raise"); err != nil {
			return nil, err
		}
	}
	res, err := c.srv.rt.ResolveApproval(c.id, engine.Decision{ApprovalID: p.ApprovalID, Approved: *p.Approved, Notes: p.Notes, Reviewer: c.reviewer(), Limits: p.Limits})
	if err != nil {
		return hostReply(nil, err)
	}
	return *res.Approval, nil
}

// paramsWithin refuses params past limit bytes before they are decoded:
// what a host method keeps (in the ring, on the desk, in the agent list)
// is bounded by what it may be sent.
func paramsWithin(params *json.RawMessage, method string, limit int, setting, what string) error {
	if params != nil && len(*params) > limit {
		return invalidParams("%s params are %d bytes; at most %d are accepted (%s): shrink %s, or send a reference to where the data lives", method, len(*params), limit, setting, what)
	}
	return nil
}

// reviewer is who this connection's decisions are recorded as: the person
// (person:NAME) on a host-role connection, else the connection (conn:<id>).
func (c *conn) reviewer() string {
	if who := c.person.Load(); who != nil {
		return protocol.PersonPrefix + who.name
	}
	return "conn:" + c.id
}

// hostReply maps the registry's errors onto JSON-RPC errors.
func hostReply(v any, err error) (any, error) {
	switch {
	case err == nil:
		return v, nil
	case errors.Is(err, host.ErrNotFound), errors.Is(err, host.ErrInvalid), errors.Is(err, host.ErrNotOwner), errors.Is(err, host.ErrLimit):
		return nil, invalidParams("%v", err)
	}
	return nil, internalError("%v", err)
}
