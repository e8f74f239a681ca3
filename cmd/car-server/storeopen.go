package main

import (
	"context"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/config"
	"github.com/parslee-ai/car-server/internal/journal"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/file"
	"github.com/parslee-ai/car-server/internal/store/postgres"
)

// openStore opens the store the shared parts live in: the journals under
// $CAR_HOME (store: file), or the database (store: postgres), which must
// answer now: a daemon does not start on a store it cannot reach.
func openStore(ctx context.Context, cfg *config.Config, node string, log *zap.Logger, heads *headSink, jopts ...journal.Option) (*store.Store, error) {
	if cfg.Store == config.StorePostgres {
		url := postgres.Redact(cfg.PostgresURL)
		db, err := postgres.Open(ctx, postgresConfig(cfg, node, log))
		if err != nil {
			if !strings.Contains(err.Error(), url) {
				err = fmt.Errorf("%s: %w", url, err)
			}
			return nil, fmt.Errorf("open the shared store (store: postgres): %w", err)
		}
		log.Info("shared store opened", zap.String("store", config.StorePostgres), zap.String("url", url), zap.String("node", node),
			zap.Int("max_conns", cfg.PostgresMaxConns), zap.String("statement_timeout", cfg.PostgresStatementTimeout.String()), zap.String("journal_sync", cfg.JournalSync))
		return db.Store(), nil
	}
	st, rep, err := file.Open(file.Config{
		IdempotencyPath: cfg.IdempotencyPath,
		IdempotencySync: file.Sync(cfg.JournalSync),
		ApprovalsPath:   cfg.ApprovalsPath,
		MessagesPath:    cfg.MessagesPath,
		LeasesPath:      cfg.LeasesPath,
		RunsDir:         cfg.RunsDir,
		RunJournals:     cfg.MaxOpenRunJournals,
		AgentTokensPath: cfg.AgentTokensPath,
		PeoplePath:      cfg.PeoplePath,
		PosturesPath:    cfg.PosturesPath,
		TrajectoriesDir: cfg.TrajectoriesDir,
		HarnessPath:     cfg.HarnessPath,
		TaintPath:       cfg.TaintPath,
		Node:            node,
		Version:         version,
		Journal:         jopts,
		Events:          eventsConfig(cfg, log, heads),
	})
	if err != nil {
		return nil, err
	}
	torn := func(what, path string, r journal.Report) {
		if r.TruncatedBytes > 0 {
			log.Warn(what+" ended in a torn tail (crash residue, never acknowledged); cut it off", zap.String("path", path), zap.Int("bytes", r.TruncatedBytes))
		}
	}
	torn("idempotency journal", cfg.IdempotencyPath, rep.Idempotency)
	log.Info("idempotency journal loaded", zap.String("path", cfg.IdempotencyPath), zap.Int("records", rep.Idempotency.Lines), zap.Int("live", rep.Idempotency.Live), zap.String("journal_sync", cfg.JournalSync))
	torn("approval ledger", cfg.ApprovalsPath, rep.Approvals)
	log.Info("approval ledger loaded", zap.String("path", cfg.ApprovalsPath), zap.Int("records", rep.Approvals.Lines), zap.Int("fingerprints", rep.Approvals.Live))
	torn("message ledger", cfg.MessagesPath, rep.Messages)
	torn("lease journal", cfg.LeasesPath, rep.Leases)
	torn("taint ledger", cfg.TaintPath, rep.Taint)
	log.Info("taint ledger loaded", zap.String("path", cfg.TaintPath), zap.Int("keys", rep.Taint.Live))
	if rep.Runs.Torn > 0 {
		log.Warn("run files ended in a torn line (crash residue); cut it off", zap.String("dir", cfg.RunsDir), zap.Int("runs", rep.Runs.Torn))
	}
	log.Info("run files indexed", zap.String("dir", cfg.RunsDir), zap.Int("runs", rep.Runs.Runs), zap.Int("max_open_run_journals", cfg.MaxOpenRunJournals))
	return st, nil
}

// postgresConfig is the database part of cfg, for the daemon (node set)
// and for car-server migrate (node unset).
func postgresConfig(cfg *config.Config, node string, log *zap.Logger) postgres.Config {
	return postgres.Config{
		URL:              cfg.PostgresURL,
		MaxConns:         int32(cfg.PostgresMaxConns),
		StatementTimeout: cfg.PostgresStatementTimeout,
		Node:             node,
		Version:          version,
		ClaimLease:       cfg.ClaimLease,
		Heartbeat:        cfg.Heartbeat,
		SpoolPath:        cfg.EventsSpoolPath,
		SpoolMaxBytes:    cfg.EventsSpoolMaxBytes,
		JournalSync:      cfg.JournalSync,
		Log:              log,
	}
}
