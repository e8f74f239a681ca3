package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/host"
	"github.com/parslee-ai/car-server/protocol"
)

// The CLI decides through the daemon's doors, and so through its one
// decision path: approving the waiting request by its id records one
// decision and resolves the row once, by the CLI's connection; approving
// the same operation by its fingerprint afterwards records a second
// decision and resolves nothing again.
func TestTheCLIDecidesOnTheOneDecisionPath(t *testing.T) {
	home := t.TempDir()
	d := startDaemon(t, home)
	env := append(os.Environ(), "CAR_HOME="+home)
	dd := newDeployDesk(t, d)
	person := dd.person
	done, res := dd.submit(t)
	waiting := dd.pending(t, "")
	cli := func(args ...string) string {
		t.Helper()
		c := execBinary(args...)
		c.Env = env
		out, err := c.CombinedOutput()
		if code := exitCode(t, err); code != exitOK {
			t.Fatalf("car-server %s: %d %s", strings.Join(args, " "), code, out)
		}
		return string(out)
	}
	if out := cli("approvals", "approve", waiting.ID, "--reason", "release window"); !strings.Contains(out, "approval "+waiting.ID+" approved") {
		t.Fatalf("approvals approve %s: %s", waiting.ID, out)
	}
	select {
	case err := <-done:
		if err != nil || len(res.Results) != 1 || res.Results[0].Status != protocol.StatusSucceeded {
			t.Fatalf("after the approval: %v %+v", err, res.Results)
		}
	case <-time.After(waitLimit):
		t.Fatal("the proposal did not finish after the approval")
	}
	fp, _ := waiting.Context["fingerprint"].(string)
	if out := cli("approvals", "approve", fp, "--tier", "full_access"); !strings.Contains(out, fp+" approved at full_access") {
		t.Fatalf("approvals approve %s: %s", fp, out)
	}

	var recorded protocol.EventsQueryResult
	if err := person.Call(ctxT(t), protocol.MethodEventsQuery, protocol.EventsQueryParams{Kinds: []protocol.EventKind{"approval_recorded"}}, &recorded); err != nil {
		t.Fatal(err)
	}
	if recorded.Count != 2 {
		t.Fatalf("%d decisions recorded, want one per CLI call: %+v", recorded.Count, recorded.Events)
	}
	first, _ := recorded.Events[1].Data["reviewer"].(string) // newest first
	var evs protocol.HostEventsResult
	if err := person.Call(ctxT(t), protocol.MethodHostEvents, protocol.HostEventsParams{Limit: 1000}, &evs); err != nil {
		t.Fatal(err)
	}
	var resolved []string
	for _, ev := range evs.Events {
		if ev.Kind != host.KindApprovalResolved {
			continue
		}
		b, _ := json.Marshal(ev.Payload["approval"])
		var a host.Approval
		if err := json.Unmarshal(b, &a); err != nil {
			t.Fatal(err)
		}
		resolved = append(resolved, a.ID+" by "+a.ResolvedBy)
	}
	if len(resolved) != 1 || resolved[0] != waiting.ID+" by "+first {
		t.Fatalf("approval.resolved events %q, want one for %s by %s", resolved, waiting.ID, first)
	}
}

// A person approves a parked action from the CLI for one use within an
// hour: it runs, the record says what was allowed, and the same operation
// proposed again waits for a person again.
func TestTheCLIApprovesForOneUse(t *testing.T) {
	home := t.TempDir()
	d := startDaemon(t, home)
	env := append(os.Environ(), "CAR_HOME="+home)
	dd := newDeployDesk(t, d)
	person := dd.person
	submit := func() (chan error, *protocol.ProposalResult) { return dd.submit(t) }
	pending := func(not string) host.Approval { return dd.pending(t, not) }
	cli := func(args ...string) string {
		t.Helper()
		c := execBinary(args...)
		c.Env = env
		out, err := c.CombinedOutput()
		if code := exitCode(t, err); code != exitOK {
			t.Fatalf("car-server %s: %d %s", strings.Join(args, " "), code, out)
		}
		return string(out)
	}
	wait := func(done chan error, res *protocol.ProposalResult, want protocol.ActionStatus) {
		t.Helper()
		select {
		case err := <-done:
			if err != nil || len(res.Results) != 1 || res.Results[0].Status != want {
				t.Fatalf("the proposal: %v %+v, want %s", err, res.Results, want)
			}
		case <-time.After(waitLimit):
			t.Fatal("the proposal did not finish after the decision")
		}
	}

	done, res := submit()
	first := pending("")
	cli("approvals", "approve", first.ID, "--uses", "1", "--expires-in", "1h")
	wait(done, res, protocol.StatusSucceeded)

	var list protocol.ApprovalsListResult
	if err := person.Call(ctxT(t), protocol.MethodApprovalsList, nil, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Approvals) != 1 {
		t.Fatalf("ledger %+v", list.Approvals)
	}
	rec := list.Approvals[0]
	if rec.Uses != 1 || rec.Used != 1 || rec.ExpiresAt == nil || rec.Tool != "deploy_service" || rec.Type != "tool_call" ||
		len(rec.ParamsDigest) != 64 || rec.GrantedTier != "sandbox_edit" || rec.RequiredTier != "full_access" || rec.Reviewer == "" {
		t.Fatalf("the record does not say what it allowed, or its use: %+v", rec)
	}

	if out := cli("approvals", "list"); !strings.Contains(out, "deploy_service") || !strings.Contains(out, "used 1 of 1, until ") {
		t.Fatalf("approvals list does not show the tool and the spent use: %s", out)
	}

	done, res = submit()
	again := pending(first.ID)
	if fp, _ := again.Context["fingerprint"].(string); fp != rec.Fingerprint {
		t.Fatalf("the second request is for %v, want the spent approval's %s", again.Context["fingerprint"], rec.Fingerprint)
	}
	cli("approvals", "reject", again.ID, "--reason", "once was enough")
	wait(done, res, protocol.StatusRejected)
}
