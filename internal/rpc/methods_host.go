package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/parslee-ai/car-server/internal/approvals"
	"github.com/parslee-ai/car-server/internal/fanout"
	"github.com/parslee-ai/car-server/internal/host"
	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/protocol"
)

// The host.* methods: the registry lives in internal/host; here are the
// wire shapes, the ownership errors as JSON-RPC errors, the approver role,
// and the host.event feed of each subscribed connection.

// hostSnapshot is the reply to host.subscribe.
type hostSnapshot struct {
	Subscribed bool `json:"subscribed"`
	host.Snapshot
	Devices  []any                 `json:"devices"` // upstream's linked devices: none here
	Identity protocol.HostIdentity `json:"identity"`
}

func (c *conn) hostSubscribe(context.Context, *json.RawMessage) (any, error) {
	snap := c.srv.host.Subscribe(c.id, c.mayApprove("") == nil, c.hostFeed().Push)
	return hostSnapshot{Subscribed: true, Snapshot: snap, Devices: []any{}, Identity: c.srv.identity(c)}, nil
}

func (c *conn) hostUnsubscribe(context.Context, *json.RawMessage) (any, error) {
	return map[string]any{"subscribed": false, "was_subscribed": c.srv.host.Unsubscribe(c.id)}, nil
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

// hostEventNotice is the params of host.event: upstream's event, and its
// place in this connection's feed. dropped > 0 says that many events before
// this one were dropped because the subscriber fell behind: re-read with
// host.events, host.agents and host.approvals.
type hostEventNotice struct {
	host.Event
	Cursor  uint64 `json:"cursor"`
	Dropped uint64 `json:"dropped"`
}

// hostFeed is this connection's host.event queue, made on first use; run
// closes it when the connection ends.
func (c *conn) hostFeed() *fanout.Queue[host.Event] {
	return feed(c, &c.hostEvents, func(ctx context.Context, it fanout.Item[host.Event]) error {
		return c.notify(ctx, protocol.MethodHostEvent, hostEventNotice{Event: it.Value, Cursor: it.Cursor, Dropped: it.Dropped})
	})
}

func (c *conn) hostAgents(context.Context, *json.RawMessage) (any, error) {
	return c.srv.host.Agents(), nil
}

func (c *conn) hostApprovals(context.Context, *json.RawMessage) (any, error) {
	return map[string]any{"approvals": c.srv.host.Approvals()}, nil
}

func (c *conn) hostEventsList(_ context.Context, params *json.RawMessage) (any, error) {
	var p struct {
		Limit int `json:"limit"`
	}
	if err := optionalParams(params, &p, "{limit?: number (default 100)}"); err != nil {
		return nil, err
	}
	if p.Limit < 0 {
		return nil, invalidParams("param 'limit' must be 0 or more (0 or absent: the newest 100)")
	}
	return map[string]any{"events": c.srv.host.Events(p.Limit)}, nil
}

func (c *conn) hostRegisterAgent(_ context.Context, params *json.RawMessage) (any, error) {
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
	return map[string]any{"ok": true}, nil
}

func (c *conn) hostSetStatus(_ context.Context, params *json.RawMessage) (any, error) {
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
	var p host.NotifyRequest
	if err := optionalParams(params, &p, "{kind?: string, agent_id?: string, message?: string, payload?: object}"); err != nil {
		return nil, err
	}
	return c.srv.host.Notify(c.id, p), nil
}

func (c *conn) hostRequestApproval(_ context.Context, params *json.RawMessage) (any, error) {
	var p host.ApprovalRequest
	const shape = "{agent_id?: string, title: string, description?: string, context?: object, required_approvals?: number}"
	if err := decodeParams(params, &p, shape); err != nil {
		return nil, err
	}
	if err := requireString("title", p.Title, shape); err != nil {
		return nil, err
	}
	a, err := c.srv.host.RequestApproval(c.id, p)
	return hostReply(a, err)
}

// hostResolveApproval decides a host approval. One the permission gate
// raised is decided on the durable ledger first — an approval at the tier
// the operation needs, a denial as a rejection, the reviewer stamped here —
// and that record is what releases the parked proposal.
func (c *conn) hostResolveApproval(_ context.Context, params *json.RawMessage) (any, error) {
	var p protocol.HostResolveParams
	const shape = "{approval_id: string, approved: boolean, notes?: string}"
	if err := decodeParams(params, &p, shape); err != nil {
		return nil, err
	}
	if err := requireString("approval_id", p.ApprovalID, shape); err != nil {
		return nil, err
	}
	if p.Approved == nil {
		return nil, invalidParams("param 'approved' is required: expected %s", shape)
	}
	if err := c.mayApprove("host.resolve_approval"); err != nil {
		return nil, err
	}
	row, ok := c.srv.host.Approval(p.ApprovalID)
	if !ok {
		return hostReply(nil, fmt.Errorf("%w: no approval '%s' is kept; host.approvals lists them", host.ErrNotFound, p.ApprovalID))
	}
	reviewer := "conn:" + c.id
	if fp, tier, ok := gateOperation(row); ok && row.Status == host.ApprovalPending {
		rec := approvals.Record{Fingerprint: fp, RequiredTier: tier, Reviewer: reviewer, Reason: p.Notes, Decision: approvals.Rejected}
		if *p.Approved {
			rec.Decision = approvals.Approved
		}
		if _, err := c.srv.rt.RecordDecision(c.id, rec); err != nil {
			return nil, internalError("record the decision: %v", err)
		}
	}
	a, err := c.srv.host.Resolve(c.id, p.ApprovalID, *p.Approved, p.Notes, reviewer)
	if errors.Is(err, host.ErrInvalid) {
		// The gate saw the ledger record first and settled the row itself.
		if now, ok := c.srv.host.Approval(p.ApprovalID); ok && now.ResolvedBy == reviewer {
			return now, nil
		}
	}
	return hostReply(a, err)
}

// gateOperation returns the fingerprint and tier of an approval the
// permission gate raised.
func gateOperation(a host.Approval) (fingerprint, tier string, ok bool) {
	if a.ClientID != "" || a.Context["source"] != "permission_gate" {
		return "", "", false
	}
	fingerprint, _ = a.Context["fingerprint"].(string)
	tier, _ = a.Context["required_tier"].(string)
	if _, err := policy.ParseTier(tier); err != nil || fingerprint == "" {
		return "", "", false
	}
	return fingerprint, tier, true
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
