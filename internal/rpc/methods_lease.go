package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// Agent leases (lease.*): one lease per agent id, in the store, with a
// fencing epoch that grows on every acquire and is never handed out twice.
// The holder is the caller's principal (principal()). An agent may lease
// only its own agent_id; a plain client or the host role any. A lease held
// by another, or lost (expired, released, taken again), is a -32603 whose
// data is the lease as it stands.

// Defaults of the lease bounds (Options); config offers them as settings.
const (
	DefaultLeaseTTL             = 30 * time.Second
	DefaultLeaseMinTTL          = 100 * time.Millisecond
	DefaultLeaseMaxTTL          = time.Hour
	DefaultMaxLeaseAgentIDBytes = 256
)

// leaseStore is the store's leases, or the error every lease method
// answers without them.
func (c *conn) leaseStore() (store.Leases, error) {
	if c.srv.opts.Leases == nil {
		return nil, internalError("leases are off on this daemon (its store has none)")
	}
	return c.srv.opts.Leases, nil
}

// leaseAgent checks agent_id: present, within its bound, and the caller's
// to lease (an agent's own id; anyone's for a plain client or the host).
func (c *conn) leaseAgent(method, agentID, shape string) error {
	if err := requireString("agent_id", agentID, shape); err != nil {
		return err
	}
	if max := c.srv.opts.MaxLeaseAgentIDBytes; len(agentID) > max {
		return invalidParams("%s: agent_id is %d bytes, more than max_lease_agent_id_bytes (%d): use a shorter id", method, len(agentID), max)
	}
	if bound := c.agentID(); bound != "" && !c.isHost() && agentID != bound {
		return rpcError(protocol.CodeApprovalDenied, "%s: agent %s may lease only its own agent_id (%s), not '%s'; a plain client or the host role may lease any", method, bound, bound, echoName(agentID))
	}
	return nil
}

// leaseTTL is ttl_ms as a duration: the default when absent, refused
// outside [lease_min_ttl, lease_max_ttl].
func (c *conn) leaseTTL(method string, ttlMs *int64) (time.Duration, error) {
	o := c.srv.opts
	if ttlMs == nil {
		return min(max(o.LeaseDefaultTTL, o.LeaseMinTTL), o.LeaseMaxTTL), nil
	}
	minMs, maxMs := o.LeaseMinTTL.Milliseconds(), o.LeaseMaxTTL.Milliseconds()
	if *ttlMs < minMs || *ttlMs > maxMs {
		return 0, invalidParams("%s: ttl_ms %d is outside [%d, %d] (lease_min_ttl, lease_max_ttl): give a ttl_ms in that range, and renew before it runs out", method, *ttlMs, minMs, maxMs)
	}
	return time.Duration(*ttlMs) * time.Millisecond, nil
}

// wireLease is l as the wire has it; a lease past its expiry is free.
func wireLease(l store.Lease) protocol.Lease {
	out := protocol.Lease{AgentID: l.AgentID, Epoch: l.Epoch}
	if l.HeldAt(time.Now()) {
		h, ms := l.Holder, l.ExpiresAt.UnixMilli()
		out.Holder, out.ExpiresAtMs = &h, &ms
	}
	return out
}

// leaseError answers a store error of method: unavailable, held, lost.
func leaseError(method string, l store.Lease, err error) error {
	var e *jsonrpc2.Error
	switch {
	case isUnavailable(err):
		return storeError(method, "the lease did not change", err)
	case errors.Is(err, store.ErrLeaseHeld):
		e = internalError("%s: %v; retry after expires_at_ms, or once the holder releases it (lease.status shows it)", method, err)
	case errors.Is(err, store.ErrLeaseLost):
		e = internalError("%s: %v (it expired, was released or was acquired again); acquire it again with lease.acquire", method, err)
	default:
		return internalError("%s: %v", method, err)
	}
	e.SetError(wireLease(l))
	return e
}

const leaseAcquireShape = "{agent_id: string, ttl_ms?: integer}"

func (c *conn) leaseAcquire(ctx context.Context, params *json.RawMessage) (any, error) {
	ls, err := c.leaseStore()
	if err != nil {
		return nil, err
	}
	var p protocol.LeaseAcquireParams
	if err := decodeParams(params, &p, leaseAcquireShape); err != nil {
		return nil, err
	}
	if err := c.leaseAgent(protocol.MethodLeaseAcquire, p.AgentID, leaseAcquireShape); err != nil {
		return nil, err
	}
	ttl, err := c.leaseTTL(protocol.MethodLeaseAcquire, p.TTLMs)
	if err != nil {
		return nil, err
	}
	l, err := ls.Acquire(ctx, p.AgentID, c.principal(), ttl)
	if err != nil {
		return nil, leaseError(protocol.MethodLeaseAcquire, l, err)
	}
	return wireLease(l), nil
}

const leaseRenewShape = "{agent_id: string, epoch: integer, ttl_ms?: integer}"

func (c *conn) leaseRenew(ctx context.Context, params *json.RawMessage) (any, error) {
	ls, err := c.leaseStore()
	if err != nil {
		return nil, err
	}
	var p protocol.LeaseRenewParams
	if err := decodeParams(params, &p, leaseRenewShape); err != nil {
		return nil, err
	}
	if err := c.leaseAgent(protocol.MethodLeaseRenew, p.AgentID, leaseRenewShape); err != nil {
		return nil, err
	}
	ttl, err := c.leaseTTL(protocol.MethodLeaseRenew, p.TTLMs)
	if err != nil {
		return nil, err
	}
	l, err := ls.Renew(ctx, p.AgentID, c.principal(), p.Epoch, ttl)
	if err != nil {
		return nil, leaseError(protocol.MethodLeaseRenew, l, err)
	}
	return wireLease(l), nil
}

const leaseReleaseShape = "{agent_id: string, epoch: integer}"

func (c *conn) leaseRelease(ctx context.Context, params *json.RawMessage) (any, error) {
	ls, err := c.leaseStore()
	if err != nil {
		return nil, err
	}
	var p protocol.LeaseReleaseParams
	if err := decodeParams(params, &p, leaseReleaseShape); err != nil {
		return nil, err
	}
	if err := c.leaseAgent(protocol.MethodLeaseRelease, p.AgentID, leaseReleaseShape); err != nil {
		return nil, err
	}
	l, err := ls.Release(ctx, p.AgentID, c.principal(), p.Epoch)
	if err != nil {
		return nil, leaseError(protocol.MethodLeaseRelease, l, err)
	}
	return wireLease(l), nil
}

const leaseStatusShape = "{agent_id: string}"

func (c *conn) leaseStatus(ctx context.Context, params *json.RawMessage) (any, error) {
	ls, err := c.leaseStore()
	if err != nil {
		return nil, err
	}
	var p protocol.AgentIDParams
	if err := decodeParams(params, &p, leaseStatusShape); err != nil {
		return nil, err
	}
	if err := c.leaseAgent(protocol.MethodLeaseStatus, p.AgentID, leaseStatusShape); err != nil {
		return nil, err
	}
	l, err := ls.Status(ctx, p.AgentID)
	if err != nil {
		return nil, leaseError(protocol.MethodLeaseStatus, l, err)
	}
	return wireLease(l), nil
}
