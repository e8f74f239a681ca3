package engine

import (
	"context"
	"fmt"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/internal/store"
)

// DefaultMaxStateValueBytes is the largest state value written (encoded as
// JSON): max_state_value_bytes.
const DefaultMaxStateValueBytes = 8 << 20

// boundedState refuses a value past max bytes before the store sees it,
// whoever writes it: a state_write action, a tool's expected_effects,
// state.set.
type boundedState struct {
	store.State
	max int64
}

func (s boundedState) check(key string, value any) error {
	if n := jsonvalue.Size(value, s.max); n > s.max {
		return &LimitError{Msg: fmt.Sprintf("the value of state key '%s' is more than %d bytes as JSON (max_state_value_bytes): store a smaller value, or a reference to where the data lives", key, s.max)}
	}
	return nil
}

func (s boundedState) Set(ctx context.Context, tenant, key string, value any) error {
	if err := s.check(key, value); err != nil {
		return err
	}
	return s.State.Set(ctx, tenant, key, value)
}

func (s boundedState) Write(ctx context.Context, tenant, key string, value any) (uint64, store.Prior, error) {
	if err := s.check(key, value); err != nil {
		return 0, store.Prior{}, err
	}
	return s.State.Write(ctx, tenant, key, value)
}
