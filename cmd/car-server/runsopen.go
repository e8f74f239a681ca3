package main

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/config"
	"github.com/parslee-ai/car-server/internal/agents"
	"github.com/parslee-ai/car-server/internal/runs"
	"github.com/parslee-ai/car-server/internal/store"
)

// openRuns opens the run traces and the per-agent postures over the
// store's parts; runs this daemon left in progress are marked incomplete.
// Close both before the store.
func openRuns(ctx context.Context, cfg *config.Config, shared *store.Store, log *zap.Logger) (*runs.Store, *agents.Postures, error) {
	if shared.Runs == nil || shared.Postures == nil {
		return nil, nil, fmt.Errorf("the %s store keeps no run traces or postures", shared.Kind)
	}
	postures, err := agents.NewPostures(ctx, shared.Postures, func(err error) {
		log.Warn("the agent permissions changed elsewhere could not be read; the previous ones stay in force", zap.Error(err))
	})
	if err != nil {
		return nil, nil, err
	}
	st, incomplete, err := runs.OpenLog(ctx, shared.Runs, runs.Options{
		Grace:           cfg.RunIncompleteGrace,
		MaxPerAgent:     cfg.MaxRunsPerAgent,
		MaxInProgress:   cfg.MaxRunsInProgress,
		MaxIntentBytes:  cfg.MaxRunIntentBytes,
		MaxOutcomeBytes: cfg.MaxRunOutcomeBytes,
	})
	if err != nil {
		postures.Close()
		if errors.Is(err, store.ErrUnavailable) {
			return nil, nil, fmt.Errorf("open the run traces: %w", err)
		}
		return nil, nil, err
	}
	if shared.Kind == "file" {
		log.Info("run traces loaded", zap.String("dir", cfg.RunsDir), zap.Int("marked_incomplete", incomplete))
	} else {
		log.Info("run traces opened", zap.String("store", shared.Kind), zap.Int("marked_incomplete", incomplete))
	}
	return st, postures, nil
}
