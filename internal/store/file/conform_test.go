package file

import (
	"path/filepath"
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
			st, _, err := Open(Config{
				IdempotencyPath: filepath.Join(dir, "idempotency.jsonl"),
				ApprovalsPath:   filepath.Join(dir, "approvals.jsonl"),
				MessagesPath:    filepath.Join(dir, "messages.jsonl"),
				RunsDir:         filepath.Join(dir, "runs"),
				AgentTokensPath: filepath.Join(dir, "agent-tokens.json"),
				PosturesPath:    filepath.Join(dir, "agent-permissions.json"),
				Node:            node,
				Version:         "test",
			})
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
		"Events":      "a single daemon's event log lives in its engine's memory; only daemons that share a store need a durable one",
		"Supervisors": "a single daemon knows its own supervisors; there is no other daemon to tell",
	},
	BusListensAtOnce:      true,
	LocalClaims:           true,
	InvalidateAnyProposal: true,
	MessagesLastWins:      true,
	StateInMemory:         true,
}
