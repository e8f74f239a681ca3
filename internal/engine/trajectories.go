package engine

import (
	"context"
	"time"

	"github.com/parslee-ai/car-server/internal/metrics"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// recordTrajectory appends one dispatched attempt to the trajectory store:
// the tool, on whose behalf, how it ended, how long it took and which
// attempt it was; never a parameter or an output. A failed write is
// counted (car_trajectory_write_failures_total) and never fails the action.
func (r *run) recordTrajectory(ctx context.Context, tool string, attempt int, started time.Time, err error) {
	ts := r.rt.opts.Trajectories
	if ts == nil {
		return
	}
	status := store.TrajectorySucceeded
	if err != nil {
		status = store.TrajectoryFailed
	}
	rec := store.Trajectory{
		Tool:       tool,
		Principal:  r.sub.principal(),
		Status:     status,
		DurationMs: MsSince(started),
		Attempt:    attempt,
		At:         time.Now().UTC(),
	}
	// The action's end does not cut the record short.
	if werr := ts.Append(context.WithoutCancel(ctx), rec); werr != nil {
		metrics.TrajectoryWriteFailures.Inc()
	}
}

// principal names who a proposal runs for, as a trajectory records it:
// agent:<id> for a bound agent, else the connection's principal (plain or
// host).
func (sub *Submission) principal() string {
	if sub.Agent != "" {
		return protocol.PrincipalAgent + ":" + sub.Agent
	}
	if sub.Session == nil {
		return protocol.PrincipalPlain
	}
	return sub.Session.requester().Principal
}
