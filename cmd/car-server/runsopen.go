package main

import (
	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/config"
	"github.com/parslee-ai/car-server/internal/agents"
	"github.com/parslee-ai/car-server/internal/runs"
)

// openRuns loads the run traces and the per-agent postures.
func openRuns(cfg *config.Config, log *zap.Logger) (*runs.Store, *agents.Postures, error) {
	postures, err := agents.OpenPostures(cfg.PosturesPath)
	if err != nil {
		return nil, nil, err
	}
	st, rep, err := runs.Open(cfg.RunsDir, runs.Options{Grace: cfg.RunIncompleteGrace})
	if err != nil {
		return nil, nil, err
	}
	if rep.Torn > 0 {
		log.Warn("run files ended in a torn line (crash residue); cut it off", zap.String("dir", cfg.RunsDir), zap.Int("runs", rep.Torn))
	}
	log.Info("run traces loaded", zap.String("dir", cfg.RunsDir), zap.Int("runs", rep.Runs), zap.Int("marked_incomplete", rep.Incomplete))
	return st, postures, nil
}
