package host

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/parslee-ai/car-server/protocol"
)

// Approval statuses.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalDenied   = "denied"
	ApprovalExpired  = "expired"
)

// Approval is one request for a person's decision, as every reader sees it.
type Approval = protocol.HostApproval

// ApprovalRequest is the params of host.request_approval.
type ApprovalRequest = protocol.HostApprovalParams

// Operation is what an approval the permission gate raised decides: an
// approval of it is recorded on the ledger for Fingerprint at
// RequiredTier. It travels beside the row as typed fields; the row's
// context shows the same values to a person (and to the other daemons,
// which read them back once, when the row arrives: see mirrorOperation).
type Operation struct {
	Fingerprint  string
	RequiredTier string // a tier name, read_only, sandbox_edit or full_access
	// What the operation is (the fingerprint's inputs) and the tier its
	// session held, kept on the decision's ledger record.
	Type, Tool, ParamsDigest, GrantedTier string
}

// Context members of an approval the permission gate raised, as the wire
// shows them.
const (
	gateSource      = "permission_gate"
	ctxSource       = "source"
	ctxFingerprint  = "fingerprint"
	ctxRequiredTier = "required_tier"
	ctxType         = "type"
	ctxTool         = "tool"
	ctxParamsDigest = "params_digest"
	ctxGrantedTier  = "granted_tier"
)

// Approvals returns every kept approval, oldest first, for host.approvals.
func (r *Registry) Approvals() []Approval {
	r.mu.Lock()
	defer r.unlock()
	return r.approvalsLocked()
}

func (r *Registry) approvalsLocked() []Approval {
	out := make([]Approval, 0, len(r.approvals))
	for _, ap := range r.approvals {
		out = append(out, *ap)
	}
	return out
}

// Approval returns one kept approval by id.
func (r *Registry) Approval(id string) (Approval, bool) {
	a, _, ok := r.Gate(id)
	return a, ok
}

// Gate returns one kept approval by id, with the operation it decides when
// the permission gate raised it, here or on another daemon; op is the zero
// Operation for any other approval.
func (r *Registry) Gate(id string) (a Approval, op Operation, ok bool) {
	r.mu.Lock()
	defer r.unlock()
	ap, ok := r.byID[id]
	if !ok {
		return Approval{}, Operation{}, false
	}
	return *ap, r.gates[id], true
}

// Requester is who caused an approval (Approval.RequestedBy).
type Requester = protocol.ApprovalRequester

// RequestApproval records an approval raised by conn, a plain client whose
// name is not known: RequestApprovalBy with the connection alone.
func (r *Registry) RequestApproval(conn string, req ApprovalRequest) (Approval, error) {
	return r.RequestApprovalBy(Requester{Principal: protocol.PrincipalPlain, Connection: conn}, req)
}

// RequestApprovalBy records an approval raised by the connection of by,
// which alone may resolve it, and which it counts against (see
// MaxPendingPerConn). When req names an agent that connection registered,
// that agent's status flips to waiting_for_approval; naming another
// connection's agent is refused, as any other change to it would be. Emits
// approval.requested.
func (r *Registry) RequestApprovalBy(by Requester, req ApprovalRequest) (Approval, error) {
	if by.Connection == "" {
		return Approval{}, fmt.Errorf("%w: an approval raised by a client needs its connection id", ErrInvalid)
	}
	return r.raise(by.Connection, &by, req, nil)
}

// RaiseSystem records a system-level approval (ClientID "") for the daemon's
// own gates, which any approver may resolve, and emits approval.requested.
// It counts against no connection.
func (r *Registry) RaiseSystem(req ApprovalRequest) (Approval, error) {
	return r.raise("", nil, req, nil)
}

// RaiseGate is RaiseGateFor with nobody to charge.
func (r *Registry) RaiseGate(req ApprovalRequest, op Operation) (Approval, error) {
	return r.RaiseGateFor(req, op, nil)
}

// RaiseGateFor is RaiseSystem for the permission gate: the approval decides
// op, which Gate returns with it. Its context shows op to a person, beside
// what req's context says. by, when not nil, is whose proposal it waits
// for: the approval names it and counts against it, as a request that
// connection raised itself would, though any approver may resolve it.
func (r *Registry) RaiseGateFor(req ApprovalRequest, op Operation, by *Requester) (Approval, error) {
	if op.Fingerprint == "" || op.RequiredTier == "" {
		return Approval{}, fmt.Errorf("%w: a gate approval needs the operation's fingerprint and required tier", ErrInvalid)
	}
	req.Context = maps.Clone(req.Context)
	if req.Context == nil {
		req.Context = map[string]any{}
	}
	req.Context[ctxSource], req.Context[ctxFingerprint], req.Context[ctxRequiredTier] = gateSource, op.Fingerprint, op.RequiredTier
	for k, v := range map[string]string{ctxType: op.Type, ctxTool: op.Tool, ctxParamsDigest: op.ParamsDigest, ctxGrantedTier: op.GrantedTier} {
		if v != "" {
			req.Context[k] = v
		}
	}
	return r.raise("", by, req, &op)
}

func (r *Registry) raise(conn string, by *Requester, req ApprovalRequest, op *Operation) (Approval, error) {
	if strings.TrimSpace(req.Title) == "" {
		return Approval{}, fmt.Errorf("%w: approval title is empty; say what the person is asked to approve", ErrInvalid)
	}
	if req.RequiredApprovals < 0 {
		return Approval{}, fmt.Errorf("%w: required_approvals is %d; give a positive number or leave it out for 1", ErrInvalid, req.RequiredApprovals)
	}
	if req.RequiredApprovals == 0 {
		req.RequiredApprovals = 1
	}
	r.mu.Lock()
	defer r.unlock()
	agent, flip := r.agents[req.AgentID]
	if flip && conn != "" && agent.SessionID != conn {
		return Approval{}, notOwner(req.AgentID)
	}
	if by != nil {
		by = r.nameLocked(*by)
	}
	if err := r.makeRoomLocked(by); err != nil {
		return Approval{}, err
	}
	ap := &Approval{
		ID:                "approval-" + uuid.NewString(),
		AgentID:           req.AgentID,
		Title:             req.Title,
		Description:       req.Description,
		Context:           req.Context,
		RequiredApprovals: req.RequiredApprovals,
		Status:            ApprovalPending,
		ClientID:          conn,
		CreatedAt:         now(),
		RequestedBy:       by,
	}
	if r.cl != nil {
		ap.Node = r.cl.node
	}
	r.approvals = append(r.approvals, ap)
	r.byID[ap.ID] = ap
	if op != nil {
		r.gates[ap.ID] = *op
	}
	r.emitLocked(KindApprovalRequested, ap.AgentID, ap.Title, map[string]any{"approval": *ap})
	if flip && agent.Status != StatusWaiting {
		r.setStatusLocked(agent, StatusWaiting, "waiting for approval: "+ap.Title)
	}
	return *ap, nil
}

// nameLocked is by with the name of its agent, when that agent registered
// on the host surface under the same id.
func (r *Registry) nameLocked(by Requester) *Requester {
	if a, ok := r.agents[by.AgentID]; ok && by.AgentID != "" && by.AgentName == "" {
		by.AgentName = a.Name
	}
	return &by
}

// chargedTo is whom a pending approval counts against: an agent-bound
// connection's agent, all its connections together, else the connection.
// It is "" for an approval nobody caused (RaiseSystem).
func chargedTo(by *Requester) string {
	switch {
	case by == nil || by.Connection == "":
		return ""
	case by.Principal == protocol.PrincipalAgent && by.AgentID != "":
		return "agent " + by.AgentID
	}
	return "connection " + by.Connection
}

// makeRoomLocked enforces the bounds before a new approval is kept: the
// pending approvals by's principal caused (those it raised and those its
// proposals wait for), then the total, evicting the oldest resolved
// approval.
func (r *Registry) makeRoomLocked(by *Requester) error {
	if who := chargedTo(by); who != "" {
		pending := 0
		for _, ap := range r.approvals {
			if ap.Status == ApprovalPending && !r.mirrorLocked(ap) && chargedTo(ap.RequestedBy) == who {
				pending++
			}
		}
		if pending >= r.opts.MaxPendingPerConn {
			return fmt.Errorf("%w: %s already has %d approvals pending (the requests it raised and the approvals its proposals wait for), the most one connection or agent may have; resolve some, or let them expire, first", ErrLimit, who, pending)
		}
	}
	if len(r.approvals) < r.opts.MaxApprovals {
		return nil
	}
	i := slices.IndexFunc(r.approvals, func(ap *Approval) bool { return ap.Status != ApprovalPending })
	if i < 0 {
		// Another daemon's approval is only a view here: its own daemon
		// keeps it.
		i = slices.IndexFunc(r.approvals, r.mirrorLocked)
	}
	if i < 0 {
		return fmt.Errorf("%w: all %d kept approvals are pending; resolve or let some expire before raising another", ErrLimit, len(r.approvals))
	}
	r.forgetLocked(i)
	return nil
}

// forgetLocked drops the i-th kept approval.
func (r *Registry) forgetLocked(i int) {
	delete(r.byID, r.approvals[i].ID)
	delete(r.gates, r.approvals[i].ID)
	r.approvals = slices.Delete(r.approvals, i, i+1)
}

// mirrorOperation reads the operation of another daemon's approval from
// the context it arrived with: the one place a gate's fingerprint is read
// back from the wire. ok is false for an approval the gate did not raise.
func mirrorOperation(ap Approval) (op Operation, ok bool) {
	if ap.ClientID != "" || ap.Context[ctxSource] != gateSource {
		return Operation{}, false
	}
	op.Fingerprint, _ = ap.Context[ctxFingerprint].(string)
	op.RequiredTier, _ = ap.Context[ctxRequiredTier].(string)
	op.Type, _ = ap.Context[ctxType].(string)
	op.Tool, _ = ap.Context[ctxTool].(string)
	op.ParamsDigest, _ = ap.Context[ctxParamsDigest].(string)
	op.GrantedTier, _ = ap.Context[ctxGrantedTier].(string)
	return op, op.Fingerprint != "" && op.RequiredTier != ""
}

// Resolve marks a pending approval approved or denied by reviewer (the rpc
// layer passes "conn:<id>"). A client-raised approval may be resolved only by
// the connection that raised it; a system-level one by anyone (the caller
// checks the approver role). Emits approval.resolved, except for an approval
// raised on another daemon: its mirror here is marked, and its own daemon
// emits approval.resolved once the decision reaches it (see Join).
func (r *Registry) Resolve(conn, id string, approved bool, notes, reviewer string) (Approval, error) {
	r.mu.Lock()
	defer r.unlock()
	ap, err := r.pendingLocked(id)
	if err != nil {
		return Approval{}, err
	}
	if ap.ClientID != "" && ap.ClientID != conn {
		return Approval{}, fmt.Errorf("approval '%s' is %w: only the session that raised it may resolve it", id, ErrNotOwner)
	}
	t := now()
	ap.Status = ApprovalDenied
	if approved {
		ap.Status = ApprovalApproved
	}
	ap.ResolvedAt, ap.ResolvedBy, ap.Approved, ap.Notes = &t, reviewer, &approved, notes
	if !r.mirrorLocked(ap) {
		r.emitLocked(KindApprovalResolved, ap.AgentID, ap.Title+": "+ap.Status, map[string]any{"approval": *ap})
	}
	return *ap, nil
}

// Count records approvers (the people whose approvals count so far) on a
// pending approval a quorum keeps waiting, and tells the subscribers
// (approval.counted). An approval no longer pending is left as it is.
func (r *Registry) Count(id string, approvers []string) (Approval, error) {
	r.mu.Lock()
	defer r.unlock()
	ap, err := r.pendingLocked(id)
	if err != nil {
		return Approval{}, err
	}
	if slices.Equal(ap.Approvers, approvers) || r.mirrorLocked(ap) {
		return *ap, nil // a mirror is counted by the daemon that raised it
	}
	ap.Approvers = slices.Clone(approvers)
	r.emitLocked(KindApprovalCounted, ap.AgentID, fmt.Sprintf("%s: %d of %d approvals", ap.Title, len(ap.Approvers), ap.RequiredApprovals), map[string]any{"approval": *ap})
	return *ap, nil
}

// PendingHere returns the pending approvals this daemon raised (not the
// views of another daemon's), oldest first.
func (r *Registry) PendingHere() []Approval {
	r.mu.Lock()
	defer r.unlock()
	var out []Approval
	for _, ap := range r.approvals {
		if ap.Status == ApprovalPending && !r.mirrorLocked(ap) {
			out = append(out, *ap)
		}
	}
	return out
}

// Restore keeps approvals a previous run of the daemon left undecided, as
// expired with reason as their notes, so that a person still sees what was
// asked (and, for a gate's, the fingerprint to approve for a resubmission).
// They count against nobody and make room as any kept approval does; past
// the bound the oldest are not kept. Emits nothing: they are history.
func (r *Registry) Restore(aps []Approval, reason string) {
	r.mu.Lock()
	defer r.unlock()
	for _, a := range aps {
		if a.ID == "" || r.byID[a.ID] != nil || r.makeRoomLocked(nil) != nil {
			continue
		}
		ap := a
		t := now()
		ap.Status, ap.ResolvedAt, ap.Notes = ApprovalExpired, &t, reason
		r.approvals = append(r.approvals, &ap)
		r.byID[ap.ID] = &ap
		if op, ok := mirrorOperation(ap); ok {
			r.gates[ap.ID] = op
		}
	}
}

// Expire marks a pending approval expired (the gate's timeout, with reason
// kept as its notes) and emits approval.resolved with status expired.
func (r *Registry) Expire(id, reason string) (Approval, error) {
	r.mu.Lock()
	defer r.unlock()
	ap, err := r.pendingLocked(id)
	if err != nil {
		return Approval{}, err
	}
	r.expireLocked(ap, reason)
	return *ap, nil
}

func (r *Registry) expireLocked(ap *Approval, reason string) {
	t := now()
	ap.Status, ap.ResolvedAt, ap.Notes = ApprovalExpired, &t, reason
	r.emitLocked(KindApprovalResolved, ap.AgentID, ap.Title+": "+ap.Status, map[string]any{"approval": *ap})
}

// expireHereLocked expires the mirror of another daemon's approval, telling
// this daemon's subscribers only.
func (r *Registry) expireHereLocked(ap *Approval, reason string) {
	t := now()
	ap.Status, ap.ResolvedAt, ap.Notes = ApprovalExpired, &t, reason
	r.emitHereLocked(KindApprovalResolved, ap.AgentID, ap.Title+": "+ap.Status, map[string]any{"approval": *ap})
}

// pendingLocked finds approval id and checks it still awaits a decision.
func (r *Registry) pendingLocked(id string) (*Approval, error) {
	ap, ok := r.byID[id]
	if !ok {
		return nil, fmt.Errorf("%w: no approval '%s' is kept; host.approvals lists them", ErrNotFound, id)
	}
	if ap.Status != ApprovalPending {
		return nil, fmt.Errorf("%w: approval '%s' is already %s; only a pending approval can be resolved", ErrInvalid, id, ap.Status)
	}
	return ap, nil
}
