package main

import (
	"context"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/config"
	"github.com/parslee-ai/car-server/internal/auditlog"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/file"
)

// headSink hands the signed heads of the file store's event log to the
// Runtime's subscribers, once the Runtime exists.
type headSink struct {
	to atomic.Pointer[engine.EventLog]
}

// deliver announces h as an audit.head event.
func (s *headSink) deliver(h auditlog.Head) {
	l := s.to.Load()
	if l == nil {
		return
	}
	l.Announce(engine.Event{Kind: engine.EventAuditHead, Seq: h.Seq, Node: h.Node, Timestamp: h.Time, Data: map[string]any{
		"seq": h.Seq, "hash": h.Hash, "time": h.Time, "node": h.Node, "signature": h.Signature,
	}})
}

// eventsConfig is the file store's durable event log as cfg sets it.
func eventsConfig(cfg *config.Config, log *zap.Logger, heads *headSink) *file.EventsConfig {
	return &file.EventsConfig{
		Dir:        cfg.EventsDir,
		KeyPath:    cfg.AuditKeyPath,
		MaxAge:     cfg.EventsRetention,
		MaxBytes:   cfg.EventsMaxBytes,
		HeadEvery:  cfg.AuditHeadEvery,
		HeadPeriod: cfg.AuditHeadInterval,
		OnHead:     heads.deliver,
		Report: func(err error) {
			log.Error("event log", zap.Error(err))
		},
	}
}

// attachEventLog makes the file store's durable event log the Runtime's:
// the chain continues from its newest event, and every event is written
// to it. A store without one, or a cluster's (joinCluster), is left alone.
func attachEventLog(ctx context.Context, rt *engine.Runtime, shared *store.Store, heads *headSink, log *zap.Logger) error {
	events, ok := shared.Events.(*file.Events)
	if !ok {
		return nil
	}
	if err := rt.Events.JoinCluster(ctx, shared.Node, events); err != nil {
		return err
	}
	heads.to.Store(rt.Events)
	st := events.Stats()
	log.Info("event log opened", zap.Int("segments", st.Segments),
		zap.Int("events", st.Events), zap.Int64("bytes", st.Bytes), zap.Uint64("seq", st.Durable))
	return nil
}
