package main

import (
	"strings"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/host"
	"github.com/parslee-ai/car-server/protocol"
)

// A proposal waiting for a person when the daemon is told to stop is
// answered at once, saying the daemon is stopping and what to approve; the
// stop does not wait out its grace (ten minutes here, against a wait of
// waitLimit). After the restart the request is listed as expired, "daemon
// restarted", with its fingerprint, and approving that fingerprint lets the
// resubmission run.
func TestShutdownAnswersParkedProposalsAndTheRestartListsThem(t *testing.T) {
	home := t.TempDir()
	d := startDaemon(t, home, "CAR_SHUTDOWN_GRACE=10m")
	dd := newDeployDesk(t, d)
	done, res := dd.submit(t)
	waiting := dd.pending(t, "")
	fp, _ := waiting.Context["fingerprint"].(string)
	if fp == "" {
		t.Fatalf("the request names no fingerprint: %+v", waiting)
	}

	stopped := time.Now()
	d.stop(t) // fails the test unless the daemon exits within waitLimit, far short of the grace
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the parked proposal got an error instead of its result: %v", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("the parked proposal was not answered")
	}
	msg := res.Results[0].Error
	if res.Results[0].Status == protocol.StatusSucceeded || msg == nil || !strings.Contains(*msg, "the daemon is stopping") || !strings.Contains(*msg, fp) || !strings.Contains(*msg, "resubmit") {
		t.Fatalf("the parked action's answer does not say the daemon is stopping, the fingerprint and what to do: %+v", res.Results[0])
	}
	t.Logf("stopped in %s with a grace of 10m", time.Since(stopped).Round(time.Millisecond))

	d = startDaemon(t, home)
	dd = newDeployDesk(t, d)
	person := dd.person
	var list protocol.HostApprovalsResult
	if err := person.Call(ctxT(t), protocol.MethodHostApprovals, nil, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Approvals) != 1 {
		t.Fatalf("after the restart %d requests are listed, want the interrupted one: %+v", len(list.Approvals), list.Approvals)
	}
	got := list.Approvals[0]
	if got.ID != waiting.ID || got.Status != host.ApprovalExpired || got.Notes != "expired: daemon restarted" || got.Context["fingerprint"] != fp || got.Title != waiting.Title {
		t.Fatalf("the interrupted request after the restart: %+v", got)
	}
	// The person approves the operation; the agent's resubmission runs.
	if err := person.Call(ctxT(t), protocol.MethodPermissionApprove, map[string]any{"fingerprint": fp, "required_tier": "full_access"}, nil); err != nil {
		t.Fatal(err)
	}
	done, res = dd.submit(t)
	if err := <-done; err != nil || res.Results[0].Status != protocol.StatusSucceeded {
		t.Fatalf("the resubmission after the approval: %v %+v", err, res.Results)
	}
}
