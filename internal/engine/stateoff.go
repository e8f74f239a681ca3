package engine

import (
	"context"
	"errors"

	"github.com/parslee-ai/car-server/internal/store"
)

// errStateOff refuses a write to the state of a runtime built without one.
var errStateOff = errors.New("shared state is off: this runtime was built without a state store (engine.Options.State); the daemon always passes its store's")

// stateOff is the state of a runtime built without one (Options.State
// nil): it reads as empty and refuses every write, so that what does not
// touch state runs as before and a write says why it cannot be made.
type stateOff struct{}

var _ store.State = stateOff{}

func (stateOff) Get(context.Context, string, string) (any, bool, error) { return nil, false, nil }

func (stateOff) Set(context.Context, string, string, any) error { return errStateOff }

func (stateOff) Write(context.Context, string, string, any) (uint64, store.Prior, error) {
	return 0, store.Prior{}, errStateOff
}

func (stateOff) Restore(context.Context, string, string, uint64, store.Prior) (bool, error) {
	return false, errStateOff
}

func (stateOff) Keys(context.Context, string) ([]string, error) { return []string{}, nil }

func (stateOff) Snapshot(context.Context, string) (map[string]any, error) {
	return map[string]any{}, nil
}

func (stateOff) Export(context.Context, *string) (map[string]map[string]any, error) {
	return map[string]map[string]any{}, nil
}

func (stateOff) Replace(context.Context, *string, map[string]map[string]any) (int, error) {
	return 0, errStateOff
}
