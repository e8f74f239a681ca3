package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/host"
	"github.com/parslee-ai/car-server/protocol"
)

// Two people with their own tokens approve a deploy a quorum rule gives to
// two: the first approval (twice) leaves it parked at 1 of 2, as approvals
// watch and the approval request show; the second person's releases it;
// every decision names its person; a revoked person loses the host role.
func TestAQuorumOfTwoPeopleReleasesADeploy(t *testing.T) {
	home := t.TempDir()
	env := append(os.Environ(), "CAR_HOME="+home)
	cli := func(extra []string, args ...string) string {
		t.Helper()
		c := execBinary(args...)
		c.Env = append(slices.Clone(env), extra...)
		out, err := c.CombinedOutput()
		if code := exitCode(t, err); code != exitOK {
			t.Fatalf("car-server %s: %d %s", strings.Join(args, " "), code, out)
		}
		return string(out)
	}
	alice := strings.TrimSpace(cli(nil, "people", "issue-token", "alice"))
	bob := strings.TrimSpace(cli(nil, "people", "issue-token", "bob"))
	if len(alice) != 43 || len(bob) != 43 || alice == bob {
		t.Fatalf("the tokens: %q %q", alice, bob)
	}
	if b, _ := os.ReadFile(filepath.Join(home, "people-tokens.json")); strings.Contains(string(b), alice) || !strings.Contains(string(b), `"alice"`) {
		t.Fatalf("the people token file keeps the token itself, or not the name: %s", b)
	}
	if out := cli(nil, "people", "list"); !strings.Contains(out, "alice") || !strings.Contains(out, "bob") || strings.Contains(out, alice) {
		t.Fatalf("people list: %s", out)
	}
	if err := os.MkdirAll(filepath.Join(home, "policies"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "policies", "quorum.toml"), []byte("[[quorum]]\ntool = \"deploy_*\"\napprovers = 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	d := startDaemon(t, home)
	watch := startWatch(t, env)
	watch(func(l string) bool { return strings.HasPrefix(l, "watching for approval requests") })
	dd := newDeployDesk(t, d)
	done, res := dd.submit(t)
	req := dd.pending(t, "")
	if req.RequiredApprovals != 2 || !strings.Contains(req.Title, "from 2 people") {
		t.Fatalf("the request does not ask for two people: %+v", req)
	}
	watch(func(l string) bool { return strings.HasPrefix(l, "approval "+req.ID+" ") })
	if l := watch(func(l string) bool { return strings.HasPrefix(l, "  needs ") }); !strings.Contains(l, "2 distinct people: 0 of 2 approvals") {
		t.Fatalf("approvals watch: %s", l)
	}

	as := func(token string) []string { return []string{"CAR_HOST_TOKEN=" + token} }
	for i := range 2 { // the same person twice counts once
		cli(as(alice), "approvals", "approve", req.ID)
		if i == 0 {
			if l := watch(func(l string) bool { return strings.HasPrefix(l, "approval "+req.ID+" counted") }); !strings.Contains(l, "1 of 2 approvals (person:alice)") {
				t.Fatalf("approvals watch after alice: %s", l)
			}
		}
		now := dd.pending(t, "")
		if now.ID != req.ID || now.Status != host.ApprovalPending || !slices.Equal(now.Approvers, []string{"person:alice"}) {
			t.Fatalf("after alice the request is %+v", now)
		}
	}
	select {
	case err := <-done:
		t.Fatalf("one person released a deploy that needs two: %v %+v", err, res.Results)
	default:
	}

	cli(as(bob), "approvals", "approve", req.ID)
	select {
	case err := <-done:
		if err != nil || len(res.Results) != 1 || res.Results[0].Status != protocol.StatusSucceeded {
			t.Fatalf("after bob: %v %+v", err, res.Results)
		}
	case <-time.After(waitLimit):
		t.Fatal("the deploy stayed parked after the second person approved")
	}
	if l := watch(func(l string) bool { return strings.HasPrefix(l, "approval "+req.ID+" approved") }); !strings.Contains(l, "by person:bob") {
		t.Fatalf("approvals watch at the end: %s", l)
	}

	var list protocol.ApprovalsListResult
	if err := dd.person.Call(ctxT(t), protocol.MethodApprovalsList, nil, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Approvals) != 1 || list.Approvals[0].Reviewer != "person:bob" || !slices.Equal(list.Approvals[0].Approvers, []string{"person:alice", "person:bob"}) {
		t.Fatalf("the ledger record: %+v", list.Approvals)
	}
	var evs protocol.EventsQueryResult
	if err := dd.person.Call(ctxT(t), protocol.MethodEventsQuery, map[string]any{"kinds": []string{"approval_recorded"}}, &evs); err != nil {
		t.Fatal(err)
	}
	var reviewers []string // oldest first
	for _, e := range slices.Backward(evs.Events) {
		reviewers = append(reviewers, e.Data["reviewer"].(string))
	}
	if !slices.Equal(reviewers, []string{"person:alice", "person:alice", "person:bob"}) {
		t.Fatalf("the approval_recorded events name %v", reviewers)
	}

	// audit export --proposal tells the proposal's story, in order.
	story := exportStory(t, env, res.ProposalID)
	want := []string{"proposal_received", "permission_decision", "approval_waiting", "approval_recorded person:alice", "approval_recorded person:alice",
		"approval_recorded person:bob", "approval_settled person:bob", "approval_used person:bob", "action_started", "action_succeeded", "proposal_finished"}
	if !inOrder(story, want) {
		t.Fatalf("the exported story of %s is\n%s\nwant in order %v", res.ProposalID, strings.Join(story, "\n"), want)
	}

	// The same deploy again, after a state write, is admitted by the standing
	// approval (a use of it) and fails: its state write is rolled back.
	dd.runner.HandleRequest(protocol.MethodToolsExecute, func(context.Context, json.RawMessage) (any, error) {
		return nil, errors.New("the release broke")
	})
	var again protocol.ProposalResult
	if err := dd.runner.Call(ctxT(t), protocol.MethodProposalSubmit, map[string]any{"proposal": map[string]any{"actions": []any{
		map[string]any{"id": "mark", "type": "state_write", "parameters": map[string]any{"key": "release", "value": "v2"}},
		map[string]any{"id": "ship", "type": "tool_call", "tool": "deploy_service", "parameters": map[string]any{"env": "prod"}, "dependencies": []string{"mark"}},
	}}}, &again); err != nil {
		t.Fatal(err)
	}
	story = exportStory(t, env, again.ProposalID)
	want = []string{"proposal_received", "approval_used person:bob", "permission_decision", "action_started", "action_succeeded", "action_started", "action_failed", "state_rolled_back", "proposal_finished"}
	if !inOrder(story, want) {
		t.Fatalf("the exported story of %s is\n%s\nwant in order %v", again.ProposalID, strings.Join(story, "\n"), want)
	}

	// bob's connection has the host role until bob's token is revoked.
	bobConn, err := client.Dial(ctxT(t), "ws://"+d.addr+"/", &client.Options{HostToken: bob})
	if err != nil {
		t.Fatal(err)
	}
	defer bobConn.Close()
	if err := bobConn.Call(ctxT(t), protocol.MethodEventsRetention, map[string]any{}, nil); err != nil {
		t.Fatalf("bob, a person, is refused a host-role method: %v", err)
	}
	if out := cli(nil, "people", "revoke", "bob"); !strings.Contains(out, "revoked bob's token") {
		t.Fatalf("people revoke: %s", out)
	}
	if err := bobConn.Call(ctxT(t), protocol.MethodEventsRetention, map[string]any{}, nil); err == nil || !strings.Contains(err.Error(), "host role") {
		t.Fatalf("a revoked person kept the host role: %v", err)
	}
	if _, err := client.Dial(ctxT(t), "ws://"+d.addr+"/", &client.Options{HostToken: bob}); err == nil || !strings.Contains(err.Error(), "host token mismatch") {
		t.Fatalf("a revoked token authenticated: %v", err)
	}
	if out := cli(nil, "people", "list"); strings.Contains(out, "bob") || !strings.Contains(out, "alice") {
		t.Fatalf("people list after the revoke: %s", out)
	}
}

// exportStory is what car-server audit export --proposal id writes, one
// line per event: its kind, and the person it names when it names one.
func exportStory(t *testing.T, env []string, id string) []string {
	t.Helper()
	c := execBinary("audit", "export", "--proposal", id)
	c.Env = env
	out, err := c.Output()
	if code := exitCode(t, err); code != exitOK {
		t.Fatalf("audit export --proposal %s: %d %s", id, code, out)
	}
	var story []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var ev struct {
			Kind       string         `json:"kind"`
			ProposalID string         `json:"proposal_id"`
			Data       map[string]any `json:"data"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.ProposalID != id {
			t.Fatalf("audit export --proposal %s wrote %q (%v)", id, line, err)
		}
		if who, _ := ev.Data["reviewer"].(string); who != "" {
			ev.Kind += " " + who
		}
		story = append(story, ev.Kind)
	}
	t.Logf("the story of %s: %s", id, strings.Join(story, ", "))
	return story
}

// inOrder reports whether want appears in story in that order, other
// lines between them allowed.
func inOrder(story, want []string) bool {
	i := 0
	for _, s := range story {
		if i < len(want) && s == want[i] {
			i++
		}
	}
	return i == len(want)
}
