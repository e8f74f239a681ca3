package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/host"
	"github.com/parslee-ai/car-server/protocol"
)

var approvalLine = regexp.MustCompile(`^approval (approval-[0-9a-f-]+) `)

// A person at a terminal runs the approval loop with no UI: watch prints the
// request as the runner's proposal waits, approve releases it.
func TestApprovalsWatchAnswersAnApprovalOverTheSocket(t *testing.T) {
	home := t.TempDir()
	d := startDaemon(t, home)
	env := append(os.Environ(), "CAR_HOME="+home)

	nextLine := startWatch(t, env)
	nextLine(func(l string) bool { return strings.HasPrefix(l, "watching for approval requests") })

	runner := d.dial(t)
	defer runner.Close()
	called := make(chan struct{}, 1)
	runner.HandleRequest(protocol.MethodToolsExecute, func(_ context.Context, raw json.RawMessage) (any, error) {
		called <- struct{}{}
		return map[string]any{"deployed": true}, nil
	})
	if err := runner.Call(ctxT(t), protocol.MethodToolsRegister, []map[string]any{{"name": "deploy_service"}}, nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var res protocol.ProposalResult
	go func() {
		done <- runner.Call(ctxT(t), protocol.MethodProposalSubmit, map[string]any{"proposal": map[string]any{"actions": []any{
			map[string]any{"id": "ship", "type": "tool_call", "tool": "deploy_service", "parameters": map[string]any{"env": "prod", "password": "hunter2-secret"}},
		}}}, &res)
	}()

	id := approvalLine.FindStringSubmatch(nextLine(approvalLine.MatchString))[1]
	preview := nextLine(func(l string) bool { return strings.Contains(l, "preview") })
	if !strings.Contains(preview, `"env":"prod"`) || strings.Contains(preview, "hunter2-secret") {
		t.Fatalf("the preview line: %s", preview)
	}
	approve := execBinary("approvals", "approve", id)
	approve.Env = env
	msg, err := approve.CombinedOutput()
	if code := exitCode(t, err); code != exitOK || !strings.Contains(string(msg), "approval "+id+" approved") {
		t.Fatalf("approvals approve %s: %d %s", id, code, msg)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitLimit):
		t.Fatal("the proposal did not finish after the approval")
	}
	if len(res.Results) != 1 || res.Results[0].Status != protocol.StatusSucceeded || len(called) != 1 {
		t.Fatalf("after the approval: %+v", res.Results)
	}
	// watch says how the request ended, and by whom: the CLI spoke with the
	// daemon's own host token, the person "operator".
	if l := nextLine(func(l string) bool { return strings.HasPrefix(l, "approval "+id+" approved") }); !strings.Contains(l, " by person:operator") {
		t.Fatalf("the resolution line names no reviewer: %s", l)
	}

	// Rejecting needs a reason; an unknown id is the daemon's error.
	reject := execBinary("approvals", "reject", id)
	reject.Env = env
	if msg, err := reject.CombinedOutput(); exitCode(t, err) != exitUsage || !strings.Contains(string(msg), "--reason is required") {
		t.Fatalf("reject without a reason: %s", msg)
	}
	again := execBinary("approvals", "approve", "approval-does-not-exist")
	again.Env = env
	if msg, err := again.CombinedOutput(); exitCode(t, err) != exitFailed || !strings.Contains(string(msg), "approval-does-not-exist") {
		t.Fatalf("approve an unknown id: %s", msg)
	}
}

// startWatch runs car-server approvals watch with env until the test ends,
// and returns a function that waits for its next line that matches.
func startWatch(t *testing.T, env []string) (nextLine func(match func(string) bool) string) {
	t.Helper()
	watch := execBinary("approvals", "watch")
	watch.Env = env
	out, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- watch.Wait() }()
	t.Cleanup(func() {
		_ = watch.Process.Signal(syscall.SIGINT) // it may have exited already; the wait below says how
		select {
		case <-exited:
		case <-time.After(waitLimit):
			_ = watch.Process.Kill()
			t.Error("approvals watch did not stop on SIGINT")
		}
	})
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return func(match func(string) bool) string {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatal("approvals watch ended early")
				}
				if match(l) {
					return l
				}
			case <-time.After(waitLimit):
				t.Fatal("approvals watch printed nothing that matched")
			}
		}
	}
}

// TestApprovalsWatchSaysWhoAsked: each printed request names the principal
// behind it, as the daemon's requested_by gives it.
func TestApprovalsWatchSaysWhoAsked(t *testing.T) {
	for _, tc := range []struct {
		by   protocol.ApprovalRequester
		want string
	}{
		{protocol.ApprovalRequester{Principal: protocol.PrincipalPlain, ClientName: "my-ide", Connection: "c1"}, "  asked by plain client my-ide, connection c1\n"},
		{protocol.ApprovalRequester{Principal: protocol.PrincipalAgent, AgentID: "planner", AgentName: "The Planner", ClientName: "car-server-go-client", Connection: "c2"}, "  asked by agent planner (The Planner) via car-server-go-client, connection c2\n"},
		{protocol.ApprovalRequester{Principal: protocol.PrincipalHost, Connection: "c3"}, "  asked by host, connection c3\n"},
	} {
		var out strings.Builder
		printApproval(&out, host.Approval{ID: "approval-1", Title: "tool 'deploy_service' needs full_access", RequestedBy: &tc.by}, false)
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("printed %q, want a line %q", out.String(), tc.want)
		}
	}
}
