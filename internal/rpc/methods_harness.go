package rpc

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/protocol"
)

// The harness config over the wire: harness.get reads it; harness.set and
// harness.update change it (a person or a plain client, never an agent:
// access.go). Every change is one read-modify-write under the engine's
// harness lock, saved to the store before it returns.

const (
	harnessFieldsShape = "{max_retries?: integer 0..100, retry_backoff_ms?: integer 0..60000, planning_max_replans?: integer 0..32}"
	harnessUpdateShape = "{set?: " + harnessFieldsShape + ", add?: " + harnessFieldsShape + " (added values may be negative)}"
)

func (c *conn) harnessGet(_ context.Context, params *json.RawMessage) (any, error) {
	if params != nil {
		var p struct{}
		if err := decodeKnownParams(params, &p, "{}"); err != nil {
			return nil, err
		}
	}
	return c.srv.rt.Harness(), nil
}

func (c *conn) harnessSet(ctx context.Context, params *json.RawMessage) (any, error) {
	var p protocol.HarnessFields
	if err := decodeKnownParams(params, &p, harnessFieldsShape); err != nil {
		return nil, err
	}
	return c.updateHarness(ctx, &p, nil)
}

func (c *conn) harnessUpdate(ctx context.Context, params *json.RawMessage) (any, error) {
	var p protocol.HarnessUpdateParams
	if err := decodeKnownParams(params, &p, harnessUpdateShape); err != nil {
		return nil, err
	}
	return c.updateHarness(ctx, p.Set, p.Add)
}

// updateHarness sets, then adds, in one step; a result out of bounds is
// -32602 and changes nothing. An add larger than its field's whole range is
// refused before it is added, so the sum cannot overflow.
func (c *conn) updateHarness(ctx context.Context, set, add *protocol.HarnessFields) (any, error) {
	for _, f := range harnessFields(add, &protocol.HarnessConfig{}) {
		if f.v != nil && (*f.v < -f.max || *f.v > f.max) {
			return nil, invalidParams("param 'add.%s' must be between -%d and %d, got %d; nothing was changed", f.name, f.max, f.max, *f.v)
		}
	}
	cfg, err := c.srv.rt.UpdateHarness(ctx, func(cur protocol.HarnessConfig) (protocol.HarnessConfig, error) {
		for _, f := range harnessFields(set, &cur) {
			if f.v != nil {
				*f.dst = *f.v
			}
		}
		for _, f := range harnessFields(add, &cur) {
			if f.v != nil {
				*f.dst += *f.v
			}
		}
		return cur, nil
	})
	var limit *engine.LimitError
	if errors.As(err, &limit) {
		return nil, invalidParams("%v; nothing was changed", err)
	}
	if err != nil {
		return nil, err
	}
	return cfg, nil
}

type harnessField struct {
	name string
	v    *int64 // the value fs gives, nil when it names none
	dst  *int64 // the field of cfg
	max  int64
}

// harnessFields pairs each field fs may name with its place in cfg.
func harnessFields(fs *protocol.HarnessFields, cfg *protocol.HarnessConfig) []harnessField {
	if fs == nil {
		fs = &protocol.HarnessFields{}
	}
	return []harnessField{
		{"max_retries", fs.MaxRetries, &cfg.MaxRetries, protocol.HarnessMaxRetriesLimit},
		{"retry_backoff_ms", fs.RetryBackoffMs, &cfg.RetryBackoffMs, protocol.HarnessRetryBackoffLimit},
		{"planning_max_replans", fs.PlanningMaxReplans, &cfg.PlanningMaxReplans, protocol.HarnessPlanningMaxReplansLimit},
	}
}
