package postgres

import (
	"errors"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
	"github.com/parslee-ai/car-server/protocol"
)

// A supervisor registered on a is known on b; it goes when it
// unregisters, when a closes, and counts only while a is alive.
func TestSupervisorsAcrossDaemons(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	// a's heartbeat is slow enough that the test can age it by hand.
	a := openNode(t, url, "a", func(c *Config) { c.Heartbeat = time.Hour })
	b := openNode(t, url, "b", func(c *Config) { c.Heartbeat = time.Hour })
	ctx := ctxT(t)
	sa, sb := a.Store().Supervisors, b.Store().Supervisors
	if found, err := sb.AnyAlive(ctx); found || err != nil {
		t.Fatalf("before any: %v %v", found, err)
	}
	filter := &protocol.SupervisionFilter{Tools: []string{"deploy"}}
	if err := sa.Register(ctx, "s1", filter); err != nil {
		t.Fatal(err)
	}
	if err := sa.Register(ctx, "s2", nil); err != nil {
		t.Fatal(err)
	}
	if found, err := sb.AnyAlive(ctx); !found || err != nil {
		t.Fatalf("b after a registered: %v %v", found, err)
	}
	list, err := sb.Alive(ctx)
	if err != nil || len(list) != 2 || list[0].Node != "a" || list[0].Session != "s1" || string(list[0].Filter) != `{"tools":["deploy"]}` ||
		list[1].Filter != nil || list[0].Since.IsZero() {
		t.Fatalf("b lists %+v %v", list, err)
	}
	if err := sa.Unregister(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if list, _ := sb.Alive(ctx); len(list) != 1 || list[0].Session != "s2" {
		t.Fatalf("after unregistering s1: %+v", list)
	}
	// A member that stopped heartbeating does not count.
	conn := sqlConn(t, url)
	if _, err := conn.Exec(ctx, "UPDATE car_nodes SET last_heartbeat = now() - interval '1 day' WHERE id = 'a'"); err != nil {
		t.Fatal(err)
	}
	if found, err := sb.AnyAlive(ctx); found || err != nil {
		t.Fatalf("a supervisor of a member that is not alive counts: %v %v", found, err)
	}
	if _, err := conn.Exec(ctx, "UPDATE car_nodes SET last_heartbeat = now() WHERE id = 'a'"); err != nil {
		t.Fatal(err)
	}
	if found, _ := sb.AnyAlive(ctx); !found {
		t.Fatal("a live member's supervisor does not count")
	}
	// A closing member takes its supervisors along.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if found, err := sb.AnyAlive(ctx); found || err != nil {
		t.Fatalf("after a closed: %v %v", found, err)
	}
}

// What a previous run of a member left (it died) is removed when it opens
// again.
func TestSupervisorsOfAPreviousRunRemoved(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	ctx := ctxT(t)
	a := openNode(t, url, "a")
	if _, err := sqlConn(t, url).Exec(ctx, "INSERT INTO car_supervisors (node, session, since) VALUES ('a', 'old', now())"); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlConn(t, url).Exec(ctx, "INSERT INTO car_supervisors (node, session, since) VALUES ('a', 'left-by-a-crash', now())"); err != nil {
		t.Fatal(err)
	}
	again := openNode(t, url, "a")
	if list, err := again.supervisors.Alive(ctx); err != nil || len(list) != 0 {
		t.Fatalf("after reopening: %+v %v", list, err)
	}
}

func TestSupervisorsUnavailable(t *testing.T) {
	t.Parallel()
	srv := pgtest.NewServer(t)
	db := openNode(t, srv.NewDatabase(t), "a")
	ctx := ctxT(t)
	srv.Stop(t)
	if err := db.supervisors.Register(ctx, "s", nil); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Register: %v", err)
	}
	if _, err := db.supervisors.AnyAlive(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("AnyAlive: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Errorf("Close with the database stopped: %v", err)
	}
}
