package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
)

// openNode opens a daemon's handle on url as member node, closed when t
// ends. Two handles on one URL stand for two daemons.
func openNode(t *testing.T, url, node string, tune ...func(*Config)) *DB {
	t.Helper()
	cfg := Config{URL: url, Node: node, Version: "test-" + node}
	for _, f := range tune {
		f(&cfg)
	}
	db, err := Open(ctxT(t), cfg)
	if err != nil {
		t.Fatalf("open member %s: %v", node, err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close member %s: %v", node, err)
		}
	})
	return db
}

// sqlConn is a plain connection to url for a test to look at or change the
// tables behind the store's back.
func sqlConn(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctxT(t), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// Open wires every part of the seam and Close stops them (TestMain checks
// that no goroutine is left).
// eventualLimit bounds a wait for what is genuinely eventual (a
// notification, a reconnection, a heartbeat).
const eventualLimit = 30 * time.Second

func TestOpenWiresEveryPart(t *testing.T) {
	t.Parallel()
	db := openNode(t, pgtest.URL(t), "a")
	s := db.Store()
	if s.Kind != "postgres" || s.Node != "a" || s.Approvals == nil || s.Idempotency == nil || s.State == nil || s.Messages == nil || s.Events == nil ||
		s.Bus == nil || s.Members == nil || s.Supervisors == nil || s.Health == nil || s.Close == nil ||
		s.Runs == nil || s.AgentTokens == nil || s.Postures == nil {
		t.Fatalf("store parts missing: %+v", s)
	}
	if err := s.Health(); err != nil {
		t.Fatalf("health after open: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("a second close: %v", err)
	}
}
