package main

import (
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

// TestTheHarnessConfigOutlivesACrash: the real daemon saves harness.set
// before it replies, so a SIGKILL right after leaves it for the next start.
func TestTheHarnessConfigOutlivesACrash(t *testing.T) {
	home := t.TempDir()
	d := startDaemon(t, home)
	c := d.dial(t)
	var set protocol.HarnessConfig
	if err := c.Call(ctxT(t), protocol.MethodHarnessUpdate, map[string]any{"set": map[string]any{"max_retries": 7}, "add": map[string]any{"planning_max_replans": 2}}, &set); err != nil {
		t.Fatal(err)
	}
	c.Close()
	d.kill(t)

	again := startDaemon(t, home)
	c = again.dial(t)
	defer c.Close()
	var got protocol.HarnessConfig
	if err := c.Call(ctxT(t), protocol.MethodHarnessGet, nil, &got); err != nil {
		t.Fatal(err)
	}
	if got != set || got.MaxRetries != 7 || got.PlanningMaxReplans != 2 || got.RetryBackoffMs != 100 {
		t.Fatalf("after a crash and a start: %+v, want %+v (backoff the default 100)", got, set)
	}
	again.stop(t)
}
