package postgres

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
	"github.com/parslee-ai/car-server/internal/testwait"
)

// Every daemon heartbeats its row; a member whose heartbeat is older than
// three intervals is listed as not alive.
func TestMembersList(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a, b := openNode(t, url, "a"), openNode(t, url, "b")
	ctx := ctxT(t)
	if _, err := sqlConn(t, url).Exec(ctx, `INSERT INTO car_nodes (id, version, started_at, last_heartbeat)
		VALUES ('gone', 'old', now() - interval '2 hours', now() - interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	ms, err := b.Store().Members.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 3 || ms[0].ID != "a" || ms[1].ID != "b" || ms[2].ID != "gone" {
		t.Fatalf("members %+v, want a, b, gone", ms)
	}
	if !ms[0].Alive || !ms[1].Alive || ms[2].Alive {
		t.Fatalf("alive: %+v, want a and b alive, gone not", ms)
	}
	if ms[0].Version != "test-a" || !ms[0].StartedAt.Equal(a.nodes.started.Truncate(time.Microsecond)) || ms[0].LastHeartbeat.Before(ms[0].StartedAt) {
		t.Fatalf("member a: %+v (started %v)", ms[0], a.nodes.started)
	}
	// The heartbeat goes on.
	firstBeat := ms[0].LastHeartbeat
	testwait.Eventually(t, eventualLimit, "a's heartbeat moves on", func() bool {
		ms, err := b.nodes.List(ctx)
		return err == nil && ms[0].LastHeartbeat.After(firstBeat)
	})
}

// A restarted member keeps its row, with the start time of this start.
func TestMembersRestartKeepsTheRow(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a := openNode(t, url, "a")
	first := a.nodes.started
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	again := openNode(t, url, "a")
	ms, err := again.nodes.List(ctxT(t))
	if err != nil || len(ms) != 1 || !ms[0].StartedAt.After(first) {
		t.Fatalf("after a restart: %+v %v, want one row started after %v", ms, err, first)
	}
}

// Health fails, wrapping ErrUnavailable, once a heartbeat fails, and is nil
// again after one succeeds.
func TestHealthFollowsTheDatabase(t *testing.T) {
	t.Parallel()
	srv := pgtest.NewServer(t)
	db := openNode(t, srv.NewDatabase(t), "a", func(c *Config) { c.Heartbeat = 50 * time.Millisecond })
	health := db.Store().Health
	if err := health(); err != nil {
		t.Fatal(err)
	}
	srv.Stop(t)
	testwait.Eventually(t, eventualLimit, "health reports the outage", func() bool { return health() != nil })
	err := health()
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "the shared store is unavailable") {
		t.Fatalf("health during the outage: %v", err)
	}
	if _, err := db.nodes.List(ctxT(t)); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Members.List during the outage: %v", err)
	}
	srv.Start(t)
	testwait.Eventually(t, eventualLimit, "health recovers", func() bool { return health() == nil })
}
