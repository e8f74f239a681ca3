package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/protocol"
)

const (
	stateKeyShape    = "{key: string, tenant_id?: string, with_version?: boolean}"
	stateSetShape    = "{key: string, value?: any, tenant_id?: string}"
	stateTenantShape = "{tenant_id?: string}"
)

func (c *conn) stateKey(method string, params *json.RawMessage) (protocol.StateKeyParams, error) {
	var p protocol.StateKeyParams
	if err := decodeParams(params, &p, stateKeyShape); err != nil {
		return p, err
	}
	if err := requireString("key", p.Key, stateKeyShape); err != nil {
		return p, err
	}
	if err := c.mayUseTenant(method, p.TenantID); err != nil {
		return p, err
	}
	return p, c.stateKeyAllowed(p.Key)
}

func (c *conn) stateGet(ctx context.Context, params *json.RawMessage) (any, error) {
	p, err := c.stateKey(protocol.MethodStateGet, params)
	if err != nil {
		return nil, err
	}
	if p.WithVersion {
		v, version, err := c.srv.rt.GetVersioned(ctx, p.TenantID, p.Key)
		if err != nil {
			return nil, storeError("state.get", "nothing was read", err)
		}
		if err := c.srv.rt.NoteStateRead(ctx, c.sess, p.TenantID, []string{p.Key}); err != nil {
			return nil, storeError("state.get", "nothing was read", err)
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, internalError("state.get: the value of '%s' cannot be encoded: %v", p.Key, err)
		}
		return protocol.StateVersioned{Value: raw, Version: version}, nil
	}
	v, ok, err := c.srv.rt.State.Get(ctx, p.TenantID, p.Key)
	if err != nil {
		return nil, storeError("state.get", "nothing was read", err)
	}
	if ok {
		if err := c.srv.rt.NoteStateRead(ctx, c.sess, p.TenantID, []string{p.Key}); err != nil {
			return nil, storeError("state.get", "nothing was read", err)
		}
	}
	return v, nil
}

func (c *conn) stateExists(ctx context.Context, params *json.RawMessage) (any, error) {
	p, err := c.stateKey(protocol.MethodStateExists, params)
	if err != nil {
		return nil, err
	}
	_, ok, err := c.srv.rt.State.Get(ctx, p.TenantID, p.Key)
	if err != nil {
		return nil, storeError("state.exists", "nothing was read", err)
	}
	return ok, nil
}

func (c *conn) stateSet(ctx context.Context, params *json.RawMessage) (any, error) {
	var p protocol.StateSetParams
	if err := decodeParams(params, &p, stateSetShape); err != nil {
		return nil, err
	}
	if err := requireString("key", p.Key, stateSetShape); err != nil {
		return nil, err
	}
	if err := c.mayUseTenant(protocol.MethodStateSet, p.TenantID); err != nil {
		return nil, err
	}
	if err := c.stateKeyAllowed(p.Key); err != nil {
		return nil, err
	}
	v, err := protocol.DecodeValue(p.Value)
	if err != nil {
		return nil, invalidParams("param 'value' is not valid JSON: %v", err)
	}
	if err := c.srv.rt.SetState(ctx, c.sess, p.TenantID, p.Key, v); err != nil {
		var limit *engine.LimitError
		if errors.As(err, &limit) {
			return nil, invalidParams("%v", err)
		}
		return nil, storeError("state.set", "the value was not written", err)
	}
	return "ok", nil
}

func (c *conn) stateKeys(ctx context.Context, params *json.RawMessage) (any, error) {
	var p protocol.TenantParams
	if err := optionalParams(params, &p, stateTenantShape); err != nil {
		return nil, err
	}
	if err := c.mayUseTenant(protocol.MethodStateKeys, p.TenantID); err != nil {
		return nil, err
	}
	keys, err := c.srv.rt.State.Keys(ctx, p.TenantID)
	if err != nil {
		return nil, storeError("state.keys", "nothing was read", err)
	}
	return c.visibleKeys(keys), nil
}

func (c *conn) stateSnapshot(ctx context.Context, params *json.RawMessage) (any, error) {
	var p protocol.TenantParams
	if err := optionalParams(params, &p, stateTenantShape); err != nil {
		return nil, err
	}
	if err := c.mayUseTenant(protocol.MethodStateSnapshot, p.TenantID); err != nil {
		return nil, err
	}
	snap, err := c.srv.rt.State.Snapshot(ctx, p.TenantID)
	if err != nil {
		return nil, storeError("state.snapshot", "nothing was read", err)
	}
	caps := c.sess.Capabilities()
	keys := make([]string, 0, len(snap))
	for k := range snap {
		if caps.AllowsKey(k) != nil {
			delete(snap, k)
		} else {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if err := c.srv.rt.NoteStateRead(ctx, c.sess, p.TenantID, keys); err != nil {
		return nil, storeError("state.snapshot", "nothing was read", err)
	}
	return snap, nil
}
