package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/parslee-ai/car-server/internal/approvals"
	"github.com/parslee-ai/car-server/internal/host"
	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/protocol"
)

// The decision path. A person decides through one of three doors:
// host.resolve_approval names a host approval by its id,
// permission.approve and permission.reject name an operation by its
// fingerprint, and the operator CLI calls those methods. Each door hands
// its decision to ResolveApproval. A decision on an operation is recorded
// on the durable ledger, and that record is what releases the actions
// waiting for it (awaitApprovals, on this daemon or on another sharing the
// ledger). A host row is marked decided in one place, settleRow, by
// whichever comes first: the door that named the row, or the wait the
// ledger record released.

// Decision is a person's decision as a door hands it to ResolveApproval:
// on a host approval (ApprovalID), or on an operation (Fingerprint at
// Tier) when ApprovalID is empty.
type Decision struct {
	ApprovalID  string
	Fingerprint string
	Tier        policy.Tier
	Approved    bool
	Reviewer    string // who decided, stamped by the door ("conn:<id>"), never read from params
	Notes       string // why: the ledger record's reason and the host row's notes
	Evidence    any    // kept on the ledger record
	Limits      protocol.Limits
	// Operation describes what is decided (type, tool, params digest,
	// granted tier) when the door knows it; kept on the ledger record.
	Operation host.Operation
	// proposalID is the proposal whose parked action the decided host
	// approval holds, when there is one: the approval_recorded event names
	// it, so that the proposal's story in the log says who decided.
	proposalID string
}

// Resolution is what a decision changed.
type Resolution struct {
	// Record is the decision on the ledger; nil for a host approval the
	// permission gate did not raise, which the ledger does not keep.
	Record *approvals.Record
	// Approval is the host row decided; nil for a decision on an operation.
	Approval *host.Approval
}

// ResolveApproval decides on behalf of connection conn. A host approval
// the permission gate raised (here or on another daemon) is decided on the
// ledger first, at the tier its operation needs, and then marked decided;
// any other host approval is only marked, and only by the connection that
// raised it when a client did. Errors from the host registry wrap its
// sentinels (host.ErrNotFound, host.ErrInvalid, host.ErrNotOwner); any
// other error means the ledger could not record the decision.
func (rt *Runtime) ResolveApproval(conn string, d Decision) (Resolution, error) {
	if d.ApprovalID == "" {
		rec, err := rt.recordDecision(conn, d, d.Fingerprint, d.Tier)
		if err != nil {
			return Resolution{}, err
		}
		return Resolution{Record: &rec}, nil
	}
	row, op, ok := rt.opts.Desk.Gate(d.ApprovalID)
	if !ok {
		return Resolution{}, fmt.Errorf("%w: no approval '%s' is kept; host.approvals lists them", host.ErrNotFound, d.ApprovalID)
	}
	var res Resolution
	if op.Fingerprint != "" && row.Status == host.ApprovalPending {
		tier, err := policy.ParseTier(op.RequiredTier)
		if err != nil {
			return Resolution{}, fmt.Errorf("%w: approval '%s' names required tier %q: %v; decide its operation with permission.approve {fingerprint, required_tier}", host.ErrInvalid, d.ApprovalID, op.RequiredTier, err)
		}
		d.Operation = op
		d.proposalID, _ = row.Context["proposal_id"].(string)
		rec, err := rt.recordDecision(conn, d, op.Fingerprint, tier)
		if err != nil {
			return Resolution{}, err
		}
		res.Record = &rec
		if q := rt.quorumOf(&protocol.Action{Type: protocol.ActionType(op.Type), Tool: op.Tool}); d.Approved && q > 1 {
			a, err := rt.opts.Desk.Count(d.ApprovalID, people(rec.Approvers))
			if !quorumMet(rec, q) {
				// Counted; the row waits for the rest of the quorum.
				if err != nil {
					return res, err
				}
				res.Approval = &a
				return res, nil
			}
		}
	}
	a, err := rt.settleRow(conn, d.ApprovalID, d.Approved, d.Notes, d.Reviewer)
	if err != nil {
		return res, err
	}
	res.Approval = &a
	return res, nil
}

// recordDecision stores d on the daemon-wide ledger for fingerprint at
// tier, which wakes whoever waits for it.
func (rt *Runtime) recordDecision(conn string, d Decision, fingerprint string, tier policy.Tier) (approvals.Record, error) {
	if rt.opts.Approvals == nil {
		return approvals.Record{}, errors.New("record the decision: this daemon has no approval ledger")
	}
	rec := approvals.Record{Fingerprint: fingerprint, RequiredTier: tier.String(), Decision: approvals.Rejected, Reviewer: d.Reviewer, Reason: d.Notes, Evidence: d.Evidence}
	if d.Approved {
		rec.Decision = approvals.Approved
	}
	if err := approvals.CheckLimits(d.Limits, d.Approved); err != nil {
		return rec, fmt.Errorf("%w: %v", host.ErrInvalid, err)
	}
	if d.Limits.ExpiresIn > 0 {
		at := time.Now().UTC().Add(time.Duration(d.Limits.ExpiresIn) * time.Second)
		rec.ExpiresAt = &at
	}
	rec.Uses = d.Limits.Uses
	rec.Type, rec.Tool, rec.ParamsDigest, rec.GrantedTier = d.Operation.Type, d.Operation.Tool, d.Operation.ParamsDigest, d.Operation.GrantedTier
	// The event is appended under decideMu too: a wait the record releases
	// appends its approval_settled only after it (waitSettledAfterRecord).
	rt.decideMu.Lock()
	defer rt.decideMu.Unlock()
	rt.countApprovers(&rec)
	rec, err := rt.opts.Approvals.Record(rec)
	if err != nil {
		return rec, fmt.Errorf("record the decision: %w", err)
	}
	data := map[string]any{
		"fingerprint": rec.Fingerprint, "decision": rec.Decision, "required_tier": rec.RequiredTier, "reviewer": rec.Reviewer,
		"type": rec.Type, "tool": rec.Tool, "params_digest": rec.ParamsDigest, "granted_tier": rec.GrantedTier,
		"expires_at": rec.ExpiresAt, "uses": rec.Uses, "approvers": rec.Approvers,
	}
	if d.ApprovalID != "" {
		data["approval_id"] = d.ApprovalID
	}
	rt.Events.Append(Event{Kind: EventApprovalRecorded, ProposalID: d.proposalID, Connection: conn, Data: data})
	return rec, nil
}

// settleRow marks host approval id decided: the one place a host row is
// resolved. A row the same reviewer's same decision settled a moment ago
// (the door and the released wait race for it) is returned as it stands;
// the opposite decision on it is refused, as anyone's is.
func (rt *Runtime) settleRow(conn, id string, approved bool, notes, reviewer string) (host.Approval, error) {
	a, err := rt.opts.Desk.Resolve(conn, id, approved, notes, reviewer)
	if errors.Is(err, host.ErrInvalid) {
		if now, ok := rt.opts.Desk.Approval(id); ok && now.ResolvedBy == reviewer && (now.Status == host.ApprovalApproved) == approved {
			return now, nil
		}
	}
	return a, err
}
