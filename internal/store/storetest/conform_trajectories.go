package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/store"
)

// testTrajectories: records come back whole, by day, from the window's
// first day on; Prune deletes whole days before its cut and nothing after;
// records outlive a restart.
func testTrajectories(t *testing.T, open Open, opts Options) {
	if !has(opts, "Trajectories") {
		return
	}
	b := newBacking(t, open)
	d := b.open("node-a")
	day := func(n int) time.Time { return time.Date(2026, 3, 10+n, 23, 59, 58, 250000000, time.UTC) }
	recs := []store.Trajectory{
		{Tool: "fetch", Principal: "agent:alice", Status: store.TrajectorySucceeded, DurationMs: 12.5, Attempt: 1, At: day(0)},
		{Tool: "fetch", Principal: "plain", Status: store.TrajectoryFailed, DurationMs: 3, Attempt: 2, At: day(1)},
		{Tool: "write", Principal: "host", Status: store.TrajectorySucceeded, DurationMs: 40, Attempt: 1, At: day(3)},
		{Tool: "write", Principal: "host", Status: store.TrajectorySucceeded, DurationMs: 41, Attempt: 1, At: day(3).Add(-time.Hour)},
	}
	for _, r := range recs {
		if err := d.Trajectories.Append(ctx(t), r); err != nil {
			t.Fatalf("Append %+v: %v", r, err)
		}
	}
	scan := func(d *daemon, since time.Time) []store.Trajectory {
		t.Helper()
		var got []store.Trajectory
		if err := d.Trajectories.Scan(ctx(t), since, func(r store.Trajectory) error { got = append(got, r); return nil }); err != nil {
			t.Fatalf("Scan since %s: %v", since, err)
		}
		slices.SortFunc(got, func(a, b store.Trajectory) int { return a.At.Compare(b.At) })
		return got
	}
	same := func(what string, got []store.Trajectory, want ...store.Trajectory) {
		t.Helper()
		slices.SortFunc(want, func(a, b store.Trajectory) int { return a.At.Compare(b.At) })
		if len(got) != len(want) {
			t.Fatalf("%s: %d records, want %d: %+v", what, len(got), len(want), got)
		}
		for i := range want {
			if got[i].Tool != want[i].Tool || got[i].Principal != want[i].Principal || got[i].Status != want[i].Status ||
				got[i].DurationMs != want[i].DurationMs || got[i].Attempt != want[i].Attempt || !got[i].At.Equal(want[i].At) {
				t.Fatalf("%s: record %d is %+v, want %+v", what, i, got[i], want[i])
			}
		}
	}
	same("every day", scan(d, time.Time{}), recs...)
	// A window starting late on day 1 still takes all of day 1: days are whole.
	same("from day 1", scan(d, day(1).Add(time.Second)), recs[1], recs[2], recs[3])
	same("from day 4", scan(d, day(4)))

	d = b.restart(d)
	same("after a restart", scan(d, time.Time{}), recs...)

	n, err := d.Trajectories.Prune(ctx(t), day(1))
	if err != nil || n != 1 {
		t.Fatalf("Prune before day 1 = %d days, %v; want 1 (day 0)", n, err)
	}
	same("after pruning day 0", scan(d, time.Time{}), recs[1], recs[2], recs[3])
	if n, err := d.Trajectories.Prune(ctx(t), day(1)); err != nil || n != 0 {
		t.Fatalf("Prune again = %d days, %v; want 0", n, err)
	}
	if n, err := d.Trajectories.Prune(ctx(t), day(5)); err != nil || n != 2 {
		t.Fatalf("Prune before day 5 = %d days, %v; want 2 (days 1 and 3)", n, err)
	}
	same("after pruning every day", scan(d, time.Time{}))
}
