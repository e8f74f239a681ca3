package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/parslee-ai/car-server/internal/runs"
)

// What the tests of runs.Store need, on whichever log it runs over: the
// Store's own tests in package runs and the run-file tests in store/file.

// CloseRunsOnCleanup closes s when the test ends, failing it on an error.
func CloseRunsOnCleanup(t *testing.T, s *runs.Store) {
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close the store: %v", err)
		}
	})
}

// StartRun starts run runID of agent, failing the test on an error, and
// returns the run's id.
func StartRun(t *testing.T, s *runs.Store, agent, runID string) string {
	t.Helper()
	id, _, err := s.Start(context.Background(), runs.Start{RunID: runID, AgentID: agent, Intent: "test", Owner: "conn-1"})
	if err != nil {
		t.Fatalf("start run %q of %q: %v", runID, agent, err)
	}
	return id
}

// PromptTurns is n turns with prompts prefix-0, prefix-1, …, each with an
// index the Store must replace with its own.
func PromptTurns(n int, prefix string) []runs.Turn {
	out := make([]runs.Turn, n)
	for i := range out {
		out[i] = runs.Turn{Prompt: fmt.Sprintf("%s-%d", prefix, i), Index: 999}
	}
	return out
}

// ListRuns is the agent's runs, failing the test on an error.
func ListRuns(t *testing.T, s *runs.Store, agent string) []runs.Summary {
	t.Helper()
	got, err := s.List(context.Background(), agent)
	if err != nil {
		t.Fatalf("list %s: %v", agent, err)
	}
	return got
}
