package rpc

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/parslee-ai/car-server/internal/checkpoint"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/protocol"
)

// checkpointScope refuses a connection whose capabilities restrict state
// keys: a checkpoint saves and restores whole namespaces.
func (c *conn) checkpointScope(what string) error {
	if caps := c.sess.Capabilities(); caps != nil && caps.StateKeys != nil {
		return rpcError(protocol.CodeApprovalDenied, "%s touches whole namespaces, and this connection's capabilities restrict state keys (see session.capabilities.get)", what)
	}
	return nil
}

func (c *conn) checkpointSave(ctx context.Context, params *json.RawMessage) (any, error) {
	var p protocol.CheckpointSaveParams
	if err := optionalParams(params, &p, "{name?: string, tenant_id?: string}"); err != nil {
		return nil, err
	}
	if err := c.checkpointScope("checkpoint.save"); err != nil {
		return nil, err
	}
	if err := c.checkpointTenant(p.TenantID); err != nil {
		return nil, err
	}
	meta, err := c.srv.rt.SaveCheckpoint(ctx, c.id, p.Name, p.TenantID)
	if err != nil {
		return nil, checkpointError("checkpoint.save", err)
	}
	return protocol.CheckpointSaveResult{CheckpointID: meta.ID, Keys: meta.Keys, Bytes: meta.Bytes, CreatedAt: meta.CreatedAt}, nil
}

// checkpointTenant refuses an agent a checkpoint of a tenant its token does
// not admit, or of every tenant.
func (c *conn) checkpointTenant(tenant *string) error {
	if tenant == nil {
		return c.mayUseEveryTenant(protocol.MethodCheckpointSave)
	}
	return c.mayUseTenant(protocol.MethodCheckpointSave, *tenant)
}

func (c *conn) checkpointList(ctx context.Context, _ *json.RawMessage) (any, error) {
	list, err := c.srv.rt.ListCheckpoints(ctx)
	if err != nil {
		return nil, checkpointError("checkpoint.list", err)
	}
	out := make([]protocol.CheckpointInfo, 0, len(list))
	for _, m := range list {
		if !c.listsCheckpoint(m) {
			continue
		}
		out = append(out, protocol.CheckpointInfo{CheckpointID: m.ID, Name: m.Name, TenantID: m.Tenant, CreatedAt: m.CreatedAt, Keys: m.Keys, Bytes: m.Bytes, Corrupt: m.Corrupt})
	}
	return protocol.CheckpointListResult{Checkpoints: out}, nil
}

// listsCheckpoint reports whether checkpoint.list shows m to this
// connection: an agent sees the checkpoints of the tenants its token
// admits, never another tenant's nor one of every tenant (nor a corrupt
// one whose tenant is not known); anyone else sees all.
func (c *conn) listsCheckpoint(m checkpoint.Meta) bool {
	if c.agentID() == "" {
		return true
	}
	return m.Tenant != nil && c.mayUseTenant(protocol.MethodCheckpointList, *m.Tenant) == nil
}

func (c *conn) checkpointRestore(ctx context.Context, params *json.RawMessage) (any, error) {
	id, err := stringParam(params, "checkpoint_id")
	if err != nil {
		return nil, err
	}
	if err := c.checkpointScope("checkpoint.restore"); err != nil {
		return nil, err
	}
	n, err := c.srv.rt.RestoreCheckpoint(ctx, c.sess, id)
	if err != nil {
		return nil, checkpointError("checkpoint.restore", err)
	}
	return protocol.CheckpointRestoreResult{RestoredKeys: n}, nil
}

func (c *conn) checkpointDelete(_ context.Context, params *json.RawMessage) (any, error) {
	id, err := stringParam(params, "checkpoint_id")
	if err != nil {
		return nil, err
	}
	if err := c.srv.rt.DeleteCheckpoint(c.id, id); err != nil {
		return nil, checkpointError("checkpoint.delete", err)
	}
	return protocol.CheckpointDeleteResult{Deleted: id}, nil
}

// checkpointError gives each failure its code: a missing approval -32003,
// an unknown checkpoint -32602, anything else -32603.
func checkpointError(method string, err error) error {
	switch {
	case errors.Is(err, engine.ErrNeedsApproval):
		return rpcError(protocol.CodeApprovalDenied, "%v", err)
	case errors.Is(err, checkpoint.ErrNotFound):
		return invalidParams("%v", err)
	case errors.Is(err, engine.ErrCheckpointsOff):
		return internalError("%s: %v", method, err)
	}
	return internalError("%v", err)
}
