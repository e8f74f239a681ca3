package rpc

import (
	"context"
	"encoding/json"

	"github.com/parslee-ai/car-server/protocol"
)

const (
	stateKeyShape    = "{key: string, tenant_id?: string}"
	stateSetShape    = "{key: string, value?: any, tenant_id?: string}"
	stateTenantShape = "{tenant_id?: string}"
)

func (c *conn) stateKey(params *json.RawMessage) (protocol.StateKeyParams, error) {
	var p protocol.StateKeyParams
	if err := decodeParams(params, &p, stateKeyShape); err != nil {
		return p, err
	}
	if err := requireString("key", p.Key, stateKeyShape); err != nil {
		return p, err
	}
	return p, c.stateKeyAllowed(p.Key)
}

func (c *conn) stateGet(_ context.Context, params *json.RawMessage) (any, error) {
	p, err := c.stateKey(params)
	if err != nil {
		return nil, err
	}
	v, _ := c.srv.rt.State.Get(p.TenantID, p.Key)
	return v, nil
}

func (c *conn) stateExists(_ context.Context, params *json.RawMessage) (any, error) {
	p, err := c.stateKey(params)
	if err != nil {
		return nil, err
	}
	_, ok := c.srv.rt.State.Get(p.TenantID, p.Key)
	return ok, nil
}

func (c *conn) stateSet(_ context.Context, params *json.RawMessage) (any, error) {
	var p protocol.StateSetParams
	if err := decodeParams(params, &p, stateSetShape); err != nil {
		return nil, err
	}
	if err := requireString("key", p.Key, stateSetShape); err != nil {
		return nil, err
	}
	if err := c.stateKeyAllowed(p.Key); err != nil {
		return nil, err
	}
	v, err := protocol.DecodeValue(p.Value)
	if err != nil {
		return nil, invalidParams("param 'value' is not valid JSON: %v", err)
	}
	c.srv.rt.State.Set(p.TenantID, p.Key, v)
	return "ok", nil
}

func (c *conn) stateKeys(_ context.Context, params *json.RawMessage) (any, error) {
	var p protocol.TenantParams
	if err := optionalParams(params, &p, stateTenantShape); err != nil {
		return nil, err
	}
	return c.visibleKeys(c.srv.rt.State.Keys(p.TenantID)), nil
}

func (c *conn) stateSnapshot(_ context.Context, params *json.RawMessage) (any, error) {
	var p protocol.TenantParams
	if err := optionalParams(params, &p, stateTenantShape); err != nil {
		return nil, err
	}
	snap := c.srv.rt.State.Snapshot(p.TenantID)
	caps := c.sess.Capabilities()
	for k := range snap {
		if caps.AllowsKey(k) != nil {
			delete(snap, k)
		}
	}
	return snap, nil
}
