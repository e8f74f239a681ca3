package rpc

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/runs"
	"github.com/parslee-ai/car-server/protocol"
)

// openFiles counts this process's open file descriptors: the daemon's
// journals and sockets, and the test's clients.
func openFiles(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("count the open files: %v", err)
	}
	return len(fds)
}

// startRuns sends n runs.start over c and returns the run ids started and
// the errors of the refused calls.
func startRuns(t *testing.T, c *client.Client, n int, params map[string]any) (started []string, refused []error) {
	t.Helper()
	for range n {
		var r startReply
		if err := c.Call(ctxT(t), protocol.MethodRunsStart, params, &r); err != nil {
			refused = append(refused, err)
			continue
		}
		started = append(started, r.RunID)
	}
	return started, refused
}

// wantRefusal checks that err is -32602 naming setting.
func wantRefusal(t *testing.T, err error, setting string) {
	t.Helper()
	if code, msg := rpcCode(t, err); code != protocol.CodeInvalidParams || !strings.Contains(msg, setting) {
		t.Fatalf("got %d %q, want -32602 naming %s", code, msg, setting)
	}
}

// TestSixHundredRunStartsStopAtTheAgentBound: one agent's 600 runs.start
// (584 once opened a file each, until accept4 failed with "too many open
// files") start max_runs_per_agent runs and are refused past it, naming
// the setting; the open files grow with the runs started only, and a new
// client still connects and starts a run.
func TestSixHundredRunStartsStopAtTheAgentBound(t *testing.T) {
	rs := startRunsServer(t, runsSetup{})
	alice := rs.mustAgent(t, "alice")
	before := openFiles(t)
	started, refused := startRuns(t, alice, 600, map[string]any{"intent": "loop"})
	if len(started) != runs.DefaultMaxPerAgent || len(refused) != 600-runs.DefaultMaxPerAgent {
		t.Fatalf("%d runs started, %d refused; want %d started", len(started), len(refused), runs.DefaultMaxPerAgent)
	}
	for _, err := range refused {
		wantRefusal(t, err, "max_runs_per_agent")
	}
	if grew := openFiles(t) - before; grew > runs.DefaultMaxPerAgent {
		t.Fatalf("the open files grew by %d for %d runs started", grew, len(started))
	}
	bob := rs.mustAgent(t, "bob")
	startRun(t, bob, map[string]any{"intent": "still here"})
	// A run that ends frees its place.
	call(t, alice, protocol.MethodRunsComplete, map[string]any{"run_id": started[0], "outcome": map[string]any{"status": "success"}}, nil)
	startRun(t, alice, map[string]any{"intent": "one more"})
}

// TestOpenRunJournalsStayBounded: 600 runs in progress, each appended to,
// hold at most max_open_run_journals files open; every turn lands, and a
// new client still connects.
func TestOpenRunJournalsStayBounded(t *testing.T) {
	const journals, n = 16, 600
	rs := startRunsServer(t, runsSetup{journals: journals, bounds: runs.Options{MaxPerAgent: n}})
	alice := rs.mustAgent(t, "alice")
	before := openFiles(t)
	started, refused := startRuns(t, alice, n, map[string]any{"intent": "loop"})
	if len(refused) > 0 {
		t.Fatalf("%d starts refused: %v", len(refused), refused[0])
	}
	for round := range 2 {
		for _, id := range started {
			if r := recordTurns(t, alice, id, turnsN(1, fmt.Sprint("round", round))); !r.OK {
				t.Fatalf("record_turns to %s: %+v", id, r)
			}
		}
	}
	if grew := openFiles(t) - before; grew > journals {
		t.Fatalf("the open files grew by %d with %d runs in progress, bound %d", grew, n, journals)
	}
	rs.mustAgent(t, "bob")
	for _, id := range []string{started[0], started[n-1]} {
		tr := getTrace(t, alice, id)
		if len(tr.Records) != 3 || tr.Records[1].Index != 0 || tr.Records[2].Index != 1 {
			t.Fatalf("the trace of %s after its journal was closed and reopened: %+v", id, tr.Records)
		}
	}
}

// TestAFourMiBIntentOrOutcomeIsRefused: a 4 MiB intent is refused naming
// max_run_intent_bytes, and starts nothing; a 4 MiB outcome is refused
// naming max_run_outcome_bytes, and the run stays in progress.
func TestAFourMiBIntentOrOutcomeIsRefused(t *testing.T) {
	rs := startRunsServer(t, runsSetup{})
	alice := rs.mustAgent(t, "alice")
	big := strings.Repeat("x", 4<<20)
	_, refused := startRuns(t, alice, 1, map[string]any{"intent": big})
	if len(refused) != 1 {
		t.Fatal("a 4 MiB intent was accepted")
	}
	wantRefusal(t, refused[0], "max_run_intent_bytes")
	var list struct {
		Runs []runs.Summary `json:"runs"`
	}
	call(t, alice, protocol.MethodRunsList, map[string]any{"agent_id": "alice"}, &list)
	if len(list.Runs) != 0 {
		t.Fatalf("a refused start left runs: %+v", list.Runs)
	}
	id := startRun(t, alice, map[string]any{"intent": "small"})
	err := alice.Call(ctxT(t), protocol.MethodRunsComplete, map[string]any{"run_id": id, "outcome": map[string]any{"summary": big}}, nil)
	wantRefusal(t, err, "max_run_outcome_bytes")
	call(t, alice, protocol.MethodRunsList, map[string]any{"agent_id": "alice"}, &list)
	if len(list.Runs) != 1 || list.Runs[0].Status != runs.StatusInProgress {
		t.Fatalf("after a refused outcome: %+v", list.Runs)
	}
}

// TestARestartWithManyRunsReadsNoHead: a daemon restarted over many ended
// runs reads none of their heads until a run is asked for, and keeps no
// intent of one it read.
func TestARestartWithManyRunsReadsNoHead(t *testing.T) {
	const n = 100
	home := t.TempDir()
	rs := startRunsServer(t, runsSetup{home: home})
	alice := rs.mustAgent(t, "alice")
	intent := strings.Repeat("i", 64<<10)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = startRun(t, alice, map[string]any{"intent": intent})
		call(t, alice, protocol.MethodRunsComplete, map[string]any{"run_id": ids[i], "outcome": map[string]any{"status": "success"}}, nil)
	}
	if err := rs.stop(); err != nil {
		t.Fatal(err)
	}
	restarted := startRunsServer(t, runsSetup{home: home})
	if got := restarted.log.HeadsLoaded(); got != 0 {
		t.Fatalf("a restart over %d ended runs read %d heads, want none", n, got)
	}
	host := restarted.hostClient(t)
	if tr := getTrace(t, host, ids[3]); len(tr.Records) != 2 || tr.Records[0].Intent != intent {
		t.Fatalf("the trace of a run after the restart: %d records", len(tr.Records))
	}
	if got := restarted.log.HeadsLoaded(); got != 1 {
		t.Fatalf("%d heads read after one run was read, want 1", got)
	}
	var list struct {
		Runs []runs.Summary `json:"runs"`
	}
	call(t, host, protocol.MethodRunsList, map[string]any{"agent_id": "alice"}, &list)
	if len(list.Runs) != n || list.Runs[0].Intent != intent {
		t.Fatalf("runs.list after the restart: %d runs", len(list.Runs))
	}
}
