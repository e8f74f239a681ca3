package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/store"
)

// joinCluster connects this daemon's event log and supervision to the other
// daemons on the shared store. A store without cluster parts (the file
// store) joins nothing. The returned leave ends what joining started.
func joinCluster(ctx context.Context, rt *engine.Runtime, shared *store.Store, log *zap.Logger) (leave func(), err error) {
	if shared.Supervisors == nil || shared.Bus == nil {
		return func() {}, nil
	}
	var stops []func()
	leave = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	if shared.Events != nil {
		if err := rt.Events.JoinCluster(ctx, shared.Node, shared.Events); err != nil {
			return nil, err
		}
		fctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			rt.Events.Follow(fctx, engine.FollowOptions{Bus: shared.Bus, Every: time.Second, OnError: func(err error) {
				log.Warn("reading the other daemons' events failed; retrying", zap.Error(err))
			}})
		}()
		stops = append(stops, func() { cancel(); <-done })
	}
	leaveSup, err := rt.Supervisors.JoinCluster(ctx, engine.SupervisionCluster{Node: shared.Node, Bus: shared.Bus, Registry: supervisorRegistry{shared.Supervisors}})
	if err != nil {
		leave()
		return nil, fmt.Errorf("join the cluster's supervision: %w", err)
	}
	stops = append(stops, leaveSup)
	log.Info("joined the cluster", zap.String("node", shared.Node), zap.Bool("events", shared.Events != nil))
	return leave, nil
}

// supervisorRegistry is the store's registry of supervisor subscriptions as
// the engine consumes it.
type supervisorRegistry struct{ s store.Supervisors }

func (r supervisorRegistry) Register(ctx context.Context, conn string, filter json.RawMessage) error {
	return r.s.Register(ctx, conn, filter)
}

func (r supervisorRegistry) Unregister(ctx context.Context, conn string) error {
	return r.s.Unregister(ctx, conn)
}

func (r supervisorRegistry) Alive(ctx context.Context) ([]engine.RemoteSupervisor, error) {
	rows, err := r.s.Alive(ctx)
	out := make([]engine.RemoteSupervisor, 0, len(rows))
	for _, row := range rows {
		out = append(out, engine.RemoteSupervisor{Node: row.Node, Conn: row.Session, Filter: row.Filter})
	}
	return out, err
}
