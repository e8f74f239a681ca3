package main

import (
	"context"

	"github.com/parslee-ai/car-server/config"
	"github.com/parslee-ai/car-server/internal/rpc"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/file"
	"github.com/parslee-ai/car-server/protocol"
)

// auditCheck is audit.status's check of the durable event log, the same as
// car-server audit verify makes: the file store's segments, links and
// signed heads, or every daemon's chain in the shared log. nil without a
// durable log (the server then checks the in-memory chain).
func auditCheck(cfg *config.Config, shared *store.Store) func(context.Context) (protocol.AuditStatus, error) {
	switch {
	case shared.Events == nil:
		return nil
	case isFileEvents(shared.Events):
		return rpc.FileAuditCheck(cfg.EventsDir, cfg.AuditKeyPath)
	}
	return rpc.ChainAuditCheck(shared.Kind, func(ctx context.Context, cursor int64, limit int) ([]store.EventRecord, int64, error) {
		return shared.Events.Since(ctx, cursor, limit, "")
	})
}

// isFileEvents reports whether e is the file store's durable log.
func isFileEvents(e store.Events) bool {
	_, ok := e.(*file.Events)
	return ok
}
