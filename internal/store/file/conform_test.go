package file

import (
	"testing"

	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/storetest"
)

// TestConformance runs the store suite against the file store: one daemon
// over the journals of a fresh directory, opened again on the same
// directory for a restart.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func(*testing.T, string) *store.Store {
		dir := t.TempDir()
		return func(t *testing.T, node string) *store.Store {
			cfg := everyPart(dir)
			cfg.Node, cfg.Version = node, "test"
			st, _, err := Open(cfg)
			if err != nil {
				t.Fatalf("open the file store in %s: %v", dir, err)
			}
			return st
		}
	}, fileDifferences)
}

// TestConformanceJournalSyncProposal runs the suite again with results
// written at Commit and flushed once per proposal (journal_sync =
// proposal): what the store answers is the same.
func TestConformanceJournalSyncProposal(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func(*testing.T, string) *store.Store {
		dir := t.TempDir()
		return func(t *testing.T, node string) *store.Store {
			cfg := everyPart(dir)
			cfg.Node, cfg.Version, cfg.IdempotencySync = node, "test", SyncProposal
			st, _, err := Open(cfg)
			if err != nil {
				t.Fatalf("open the file store in %s: %v", dir, err)
			}
			return st
		}
	}, fileDifferences)
}

// fileDifferences is what the file store has not, and where it differs
// from the shared store today; the suite checks the file store's side of
// each.
var fileDifferences = storetest.Options{
	Without: map[string]string{
		"Supervisors": "a single daemon knows its own supervisors; there is no other daemon to tell",
	},
	BusListensAtOnce: true,
	LocalClaims:      true,
	StateInMemory:    true,
}
