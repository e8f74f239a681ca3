package postgres

import (
	"testing"

	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
	"github.com/parslee-ai/car-server/internal/store/storetest"
)

// TestConformance runs the store suite against PostgreSQL: every backing is
// a fresh database, and every daemon of a test a member of it.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func(*testing.T, string) *store.Store {
		url := pgtest.URL(t)
		return func(t *testing.T, node string) *store.Store {
			db, err := Open(ctxT(t), Config{URL: url, Node: node, Version: "test"})
			if err != nil {
				t.Fatalf("open member %s: %v", node, err)
			}
			return db.Store()
		}
	}, storetest.Options{Shared: true})
}
