package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

// daemonFiles counts the daemon's open file descriptors.
func daemonFiles(t *testing.T, d *daemon) int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", d.cmd.Process.Pid))
	if err != nil {
		t.Fatalf("count the daemon's open files: %v", err)
	}
	return len(fds)
}

// TestRunBoundSettingsReachTheDaemon: the run bounds set in the
// environment bound the binary: runs in progress past
// max_runs_per_agent and an intent past max_run_intent_bytes are refused
// naming them, 300 runs in progress hold at most max_open_run_journals
// files open, and a new client still connects.
func TestRunBoundSettingsReachTheDaemon(t *testing.T) {
	const perAgent, journals = 300, 8
	d := startDaemon(t, t.TempDir(), fmt.Sprint("CAR_MAX_RUNS_PER_AGENT=", perAgent), fmt.Sprint("CAR_MAX_OPEN_RUN_JOURNALS=", journals), "CAR_MAX_RUN_INTENT_BYTES=1024")
	c := d.dial(t)
	defer c.Close()
	before := daemonFiles(t, d)
	start := func(intent string) error {
		var r map[string]any
		return c.Call(ctxT(t), protocol.MethodRunsStart, map[string]any{"intent": intent, "agent_name": "loop"}, &r)
	}
	for i := range perAgent {
		if err := start("loop"); err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
	}
	if grew := daemonFiles(t, d) - before; grew > journals {
		t.Fatalf("the daemon's open files grew by %d with %d runs in progress, max_open_run_journals %d", grew, perAgent, journals)
	}
	if err := start("one more"); err == nil || !strings.Contains(err.Error(), "max_runs_per_agent") {
		t.Fatalf("a start past max_runs_per_agent: %v", err)
	}
	if err := start(strings.Repeat("x", 2048)); err == nil || !strings.Contains(err.Error(), "max_run_intent_bytes") {
		t.Fatalf("a 2 KiB intent past max_run_intent_bytes 1024: %v", err)
	}
	other := d.dial(t)
	defer other.Close()
	var r map[string]any
	if err := other.Call(ctxT(t), protocol.MethodRunsStart, map[string]any{"intent": "still here", "agent_name": "other"}, &r); err != nil {
		t.Fatalf("a new client's runs.start: %v", err)
	}
}
