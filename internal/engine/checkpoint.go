package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/parslee-ai/car-server/internal/approvals"
	"github.com/parslee-ai/car-server/internal/checkpoint"
	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// Checkpoints: a saved copy of state (one tenant's namespace, or all of
// them) and a restore that puts it back. A restore replaces state, which no
// rollback can undo, so it needs full_access through the approval ledger
// like any irreversible act, parking for a person when one is watching. It
// is atomic with respect to proposals: it is refused while any proposal
// runs, rather than waiting behind them, so the caller learns at once and
// nothing waits on a proposal that may itself wait for a person.

// Event kinds of checkpoints.
const (
	EventCheckpointSaved    EventKind = "checkpoint_saved"
	EventCheckpointRestored EventKind = "checkpoint_restored"
	EventCheckpointDeleted  EventKind = "checkpoint_deleted"
)

// Checkpoint errors the methods map to error codes.
var (
	ErrCheckpointsOff = errors.New("this daemon keeps no checkpoints")
	ErrNeedsApproval  = errors.New("needs an approval")
	ErrRestoreBusy    = errors.New("proposals are running")
)

// createdAtLayout sorts as text in time order.
const createdAtLayout = "2006-01-02T15:04:05.000000000Z"

// SaveCheckpoint writes the state of one tenant (tenant non-nil) or of all
// namespaces to a new checkpoint.
func (rt *Runtime) SaveCheckpoint(ctx context.Context, connID, name string, tenant *string) (checkpoint.Meta, error) {
	cps := rt.opts.Checkpoints
	if cps == nil {
		return checkpoint.Meta{}, ErrCheckpointsOff
	}
	release, err := cps.Acquire(ctx, "checkpoint.save")
	if err != nil {
		return checkpoint.Meta{}, err
	}
	defer release()
	state, err := rt.State.Export(ctx, tenant)
	if err != nil {
		return checkpoint.Meta{}, store.Wrap("checkpoint.save could not read state; nothing was saved", err)
	}
	cp := &checkpoint.Checkpoint{ID: shortID(), Name: name, Tenant: tenant, CreatedAt: time.Now().UTC().Format(createdAtLayout), State: state}
	meta, err := cps.Save(cp)
	if err != nil {
		return meta, err
	}
	rt.Events.Append(Event{Kind: EventCheckpointSaved, Connection: connID, Data: map[string]any{
		"checkpoint_id": meta.ID, "name": meta.Name, "keys": meta.Keys, "bytes": meta.Bytes, "tenant": tenantField(tenant),
	}})
	return meta, nil
}

// ListCheckpoints describes every checkpoint from the header lines of
// their files, taking one of the store's operation slots like a save or a
// restore.
func (rt *Runtime) ListCheckpoints(ctx context.Context) ([]checkpoint.Meta, error) {
	cps := rt.opts.Checkpoints
	if cps == nil {
		return nil, ErrCheckpointsOff
	}
	release, err := cps.Acquire(ctx, "checkpoint.list")
	if err != nil {
		return nil, err
	}
	defer release()
	return cps.List()
}

// DeleteCheckpoint removes a checkpoint.
func (rt *Runtime) DeleteCheckpoint(connID, id string) error {
	if rt.opts.Checkpoints == nil {
		return ErrCheckpointsOff
	}
	if err := rt.opts.Checkpoints.Delete(id); err != nil {
		return err
	}
	rt.Events.Append(Event{Kind: EventCheckpointDeleted, Connection: connID, Data: map[string]any{"checkpoint_id": id}})
	return nil
}

// RestoreCheckpoint replaces state with a checkpoint's, once a person has
// approved restoring it, and only while no proposal runs. It returns the
// number of keys restored.
func (rt *Runtime) RestoreCheckpoint(ctx context.Context, s *Session, id string) (int, error) {
	cps := rt.opts.Checkpoints
	if cps == nil {
		return 0, ErrCheckpointsOff
	}
	// An unknown checkpoint is refused before an approval is asked for;
	// its state is read only once approved, in an operation slot, so a
	// restore parked for a person holds no state.
	release, err := cps.Acquire(ctx, "checkpoint.restore")
	if err != nil {
		return 0, err
	}
	_, err = cps.Describe(id)
	release()
	if err != nil {
		return 0, err
	}
	if err := rt.approveRestore(ctx, s, id); err != nil {
		return 0, err
	}
	release, err = cps.Acquire(ctx, "checkpoint.restore")
	if err != nil {
		return 0, err
	}
	defer release()
	cp, err := cps.Load(id)
	if err != nil {
		return 0, err
	}
	if !rt.restoring.TryLock() {
		return 0, fmt.Errorf("checkpoint.restore refused: %w (%d now); a restore replaces state only while none runs, so it cannot half-undo one: let them finish (or proposal.cancel them) and restore again",
			ErrRestoreBusy, rt.inFlight.Load())
	}
	n, err := rt.State.Replace(ctx, cp.Tenant, cp.State)
	rt.restoring.Unlock()
	if err != nil {
		return 0, store.Wrap("checkpoint.restore could not replace state", err)
	}
	rt.Events.Append(Event{Kind: EventCheckpointRestored, Connection: s.ID, Data: map[string]any{
		"checkpoint_id": id, "name": cp.Name, "keys": n, "tenant": tenantField(cp.Tenant),
	}})
	return n, nil
}

// approveRestore asks the approval ledger about restoring checkpoint id: an
// operation of its own, always at full_access.
func (rt *Runtime) approveRestore(ctx context.Context, s *Session, id string) error {
	op := protocol.Action{ID: "restore-" + id, Type: protocol.ActionToolCall, Tool: "checkpoint.restore", Parameters: map[string]any{"checkpoint_id": id}}
	row := PermissionRow{ActionID: op.ID, Tool: op.Tool, Fingerprint: approvals.Fingerprint(&op), Decision: DecisionNeedsApproval,
		Required: policy.FullAccess, Reversibility: protocol.Irreversible, Granted: s.Tier(), Signals: []string{"replaces state"}, Quorum: rt.quorumOf(&op)}
	if rt.opts.Approvals == nil {
		return fmt.Errorf("checkpoint.restore %w, and this daemon has no approval ledger", ErrNeedsApproval)
	}
	rec, ok, err := rt.ledgerDecision(ctx, row.Fingerprint, policy.FullAccess)
	if err != nil {
		return fmt.Errorf("checkpoint.restore of '%s' needs an approval, and whether it has one cannot be told: %w", id, err)
	}
	if ok {
		if rec.Decision == approvals.Rejected {
			return fmt.Errorf("checkpoint.restore of '%s' (fingerprint %s) was rejected by %s: %w", id, row.Fingerprint, rec.Reviewer, ErrNeedsApproval)
		}
		if approvedAtOrAbove(rec, policy.FullAccess) && quorumMet(rec, row.Quorum) {
			return nil
		}
	}
	ask := fmt.Sprintf("approve fingerprint %s with permission.approve {fingerprint: \"%s\", required_tier: \"full_access\"}, then restore again", row.Fingerprint, row.Fingerprint)
	if !rt.canPark() {
		return fmt.Errorf("checkpoint.restore of '%s' replaces state and %w at full_access: %s", id, ErrNeedsApproval, ask)
	}
	sub := &Submission{Proposal: &protocol.ActionProposal{ID: "checkpoint-restore-" + id, Actions: []protocol.Action{op}}, Session: s}
	denied, err := rt.awaitApprovals(ctx, sub, []PermissionRow{row}, proposalParams(sub.Proposal))
	if err != nil {
		return fmt.Errorf("checkpoint.restore of '%s' %w at full_access: %w", id, ErrNeedsApproval, err)
	}
	if reason, ok := denied[op.ID]; ok {
		return fmt.Errorf("checkpoint.restore of '%s': %s: %w", id, reason, ErrNeedsApproval)
	}
	return nil
}

// tenantField is how events name a checkpoint's scope.
func tenantField(tenant *string) any {
	if tenant == nil {
		return "*"
	}
	return *tenant
}
