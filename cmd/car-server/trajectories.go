package main

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/internal/store"
)

// pruneTrajectories deletes the trajectory store's whole days older than
// retention days, at start and then every hour, until ctx ends; the
// returned channel closes when it has stopped.
func pruneTrajectories(ctx context.Context, ts store.Trajectories, retentionDays int, log *zap.Logger) <-chan struct{} {
	done := make(chan struct{})
	if ts == nil {
		close(done)
		return done
	}
	prune := func() {
		cut := time.Now().UTC().AddDate(0, 0, -retentionDays)
		n, err := ts.Prune(ctx, cut)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("pruning the trajectory store failed; it retries within the hour", zap.Error(err))
		case n > 0:
			log.Info("trajectory days past retention deleted", zap.Int("days", n), zap.Int("trajectory_retention_days", retentionDays))
		}
	}
	go func() {
		defer close(done)
		prune()
		t := time.NewTicker(time.Hour)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				prune()
			case <-ctx.Done():
				return
			}
		}
	}()
	return done
}
