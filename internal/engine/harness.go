package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/parslee-ai/car-server/protocol"
)

// The harness config (protocol.HarnessConfig) is daemon-wide: the retry
// loop reads it for actions without their own max_retries, backoff for
// every retry, and the rpc layer for the replan budget of a connection that
// set none. Changes go through UpdateHarness, one at a time under
// harnessMu, and are saved to the store before they take effect.

// defaultHarness is the config of a daemon that never saved one.
func (rt *Runtime) defaultHarness() protocol.HarnessConfig {
	return protocol.HarnessConfig{MaxRetries: 3, RetryBackoffMs: rt.opts.RetryBase.Milliseconds()}
}

// Harness returns the current harness config.
func (rt *Runtime) Harness() protocol.HarnessConfig {
	if h := rt.harness.Load(); h != nil {
		return *h
	}
	return rt.defaultHarness()
}

// LoadHarness reads the saved harness config from the store, if any;
// fields it does not name keep their defaults. The daemon calls it once at
// start.
func (rt *Runtime) LoadHarness(ctx context.Context) error {
	rt.harnessMu.Lock()
	defer rt.harnessMu.Unlock()
	cfg := rt.defaultHarness()
	if rt.opts.Harness != nil {
		doc, err := rt.opts.Harness.Load(ctx)
		if err != nil {
			return err
		}
		if doc != nil {
			if err := json.Unmarshal(doc, &cfg); err != nil {
				return fmt.Errorf("the saved harness config does not decode: %w", err)
			}
			if err := CheckHarness(cfg); err != nil {
				return fmt.Errorf("the saved harness config is out of bounds: %w", err)
			}
		}
	}
	rt.harness.Store(&cfg)
	return nil
}

// UpdateHarness applies fn to the current config under one lock, saves the
// result and makes it current: two concurrent updates never lose one
// another. An error from fn, a result out of bounds or a failed save
// changes nothing.
func (rt *Runtime) UpdateHarness(ctx context.Context, fn func(protocol.HarnessConfig) (protocol.HarnessConfig, error)) (protocol.HarnessConfig, error) {
	rt.harnessMu.Lock()
	defer rt.harnessMu.Unlock()
	next, err := fn(rt.Harness())
	if err != nil {
		return protocol.HarnessConfig{}, err
	}
	if err := CheckHarness(next); err != nil {
		return protocol.HarnessConfig{}, err
	}
	if rt.opts.Harness != nil {
		doc, err := json.Marshal(next)
		if err != nil {
			return protocol.HarnessConfig{}, err
		}
		if err := rt.opts.Harness.Save(ctx, doc); err != nil {
			return protocol.HarnessConfig{}, err
		}
	}
	rt.harness.Store(&next)
	return next, nil
}

// CheckHarness refuses a config with a field out of its bounds, naming it.
func CheckHarness(c protocol.HarnessConfig) error {
	for _, f := range []struct {
		name string
		v    int64
		max  int64
	}{
		{"max_retries", c.MaxRetries, protocol.HarnessMaxRetriesLimit},
		{"retry_backoff_ms", c.RetryBackoffMs, protocol.HarnessRetryBackoffLimit},
		{"planning_max_replans", c.PlanningMaxReplans, protocol.HarnessPlanningMaxReplansLimit},
	} {
		if f.v < 0 || f.v > f.max {
			return &LimitError{Msg: fmt.Sprintf("harness field '%s' must be between 0 and %d, got %d", f.name, f.max, f.v)}
		}
	}
	return nil
}

// attempts is how many times a tool call may be dispatched: once, plus its
// retries under failure_behavior retry: its own max_retries, or the
// harness's when it carries none (protocol.Action.MaxRetriesUnset).
func (rt *Runtime) attempts(a *protocol.Action) int {
	if a.FailureBehavior != protocol.FailRetry {
		return 1
	}
	if a.MaxRetriesUnset {
		return 1 + int(rt.Harness().MaxRetries)
	}
	return 1 + int(a.MaxRetries)
}
