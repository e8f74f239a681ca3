package store

import (
	"context"
	"time"
)

// Trajectory is one dispatched attempt of a tool call: which tool, on whose
// behalf, how it ended, how long it took, which attempt it was and when it
// ended. It holds no parameter or output value.
type Trajectory struct {
	Tool       string    `json:"tool"`
	Principal  string    `json:"principal"` // agent:<id>, plain or host
	Status     string    `json:"status"`    // TrajectorySucceeded or TrajectoryFailed
	DurationMs float64   `json:"duration_ms"`
	Attempt    int       `json:"attempt"` // 1 for the first, 2 for the first retry, …
	At         time.Time `json:"at"`      // when the attempt ended, UTC
}

// Trajectory statuses: only dispatched attempts are recorded, so an action
// rejected or skipped before its tool was called has none.
const (
	TrajectorySucceeded = "succeeded"
	TrajectoryFailed    = "failed"
)

// Trajectories is the trajectory store: one record per dispatched attempt,
// kept by UTC day, so that retention drops whole days and a reader of a
// window never opens the days outside it.
type Trajectories interface {
	// Append records one attempt under the UTC day of its At.
	Append(ctx context.Context, t Trajectory) error
	// Scan calls fn with every record of the UTC days from since's day to
	// today, in no particular order, and never reads an earlier day; fn
	// returning an error stops the scan with it.
	Scan(ctx context.Context, since time.Time, fn func(Trajectory) error) error
	// Prune deletes every whole UTC day before before's day and reports
	// how many days it deleted.
	Prune(ctx context.Context, before time.Time) (int, error)
}

// DefaultTrajectoryRetentionDays is how many days of trajectories the
// daemon keeps unless trajectory_retention_days says otherwise.
const DefaultTrajectoryRetentionDays = 90

// TrajectoryDay is the UTC day of t, as the day files and rows name it.
func TrajectoryDay(t time.Time) string { return t.UTC().Format(time.DateOnly) }
