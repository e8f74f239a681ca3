package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/agents"
	"github.com/parslee-ai/car-server/internal/runs"
	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
	"github.com/parslee-ai/car-server/protocol"
)

// agentsCommand runs car-server agents with env and returns its stdout,
// stderr and exit code.
func agentsCommand(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"agents"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return out.String(), errOut.String(), exitCode(t, err)
}

// hostOf dials d with its host token.
func hostOf(t *testing.T, d *daemon) *client.Client {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.home, "ai.parslee.car", "host-token"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(ctxT(t), "ws://"+d.addr+"/", &client.Options{HostToken: strings.TrimSpace(string(b))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestTwoDaemonsShareRunsAndAgentTokens: two daemons on one database. A
// token issued by the operator's command (store postgres, no daemon on its
// state root) binds the agent on either daemon; a run it records on A is
// listed and traced on B, and a subscription on B is refused with where to
// go; a revoke through B closes the agent's connection on A and refuses
// its next bind there; the list says what is left.
func TestTwoDaemonsShareRunsAndAgentTokens(t *testing.T) {
	url := pgtest.URL(t)
	env := []string{"CAR_STORE=postgres", "CAR_POSTGRES_URL=" + url}
	a := startDaemon(t, t.TempDir(), env...)
	b := startDaemon(t, t.TempDir(), env...)
	operator := append([]string{"CAR_HOME=" + t.TempDir()}, env...)

	out, errOut, code := agentsCommand(t, operator, "issue-token", "alice")
	token := strings.TrimSpace(out)
	if code != exitOK || len(token) != 43 {
		t.Fatalf("issue-token on store postgres: exit %d %q %s", code, out, errOut)
	}
	if _, errOut, code := agentsCommand(t, operator, "issue-token", "bob"); code != exitOK {
		t.Fatalf("issue-token bob: exit %d %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(strings.TrimPrefix(operator[0], "CAR_HOME="), "agent-tokens.json")); !os.IsNotExist(err) {
		t.Fatalf("store postgres wrote a token file: %v", err)
	}

	ctx := ctxT(t)
	alice, err := client.Dial(ctx, "ws://"+a.addr+"/", &client.Options{Token: token, AgentID: "alice"})
	if err != nil {
		t.Fatalf("alice binds on A with the token the command issued: %v", err)
	}
	defer alice.Close()
	var started struct {
		RunID string `json:"run_id"`
	}
	if err := alice.Call(ctx, protocol.MethodRunsStart, map[string]any{"intent": "across daemons"}, &started); err != nil {
		t.Fatal(err)
	}
	var rec struct {
		OK   bool `json:"ok"`
		Base int  `json:"base_index"`
	}
	if err := alice.Call(ctx, protocol.MethodRunsRecordTurns, map[string]any{"run_id": started.RunID, "turns": []map[string]any{{"prompt": "one"}, {"prompt": "two"}}}, &rec); err != nil || !rec.OK {
		t.Fatalf("record_turns on A: %+v %v", rec, err)
	}

	hostB := hostOf(t, b)
	var list protocol.RunsListResult
	if err := hostB.Call(ctx, protocol.MethodRunsList, map[string]any{"agent_id": "alice"}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Runs) != 1 || list.Runs[0].RunID != started.RunID || list.Runs[0].TurnCount != 2 || list.Runs[0].Status != runs.StatusInProgress {
		t.Fatalf("runs.list on B: %+v", list)
	}
	var tr struct {
		NotFound bool          `json:"not_found"`
		Records  []runs.Record `json:"records"`
	}
	if err := hostB.Call(ctx, protocol.MethodRunsGetTrace, map[string]any{"run_id": started.RunID}, &tr); err != nil {
		t.Fatal(err)
	}
	if tr.NotFound || len(tr.Records) != 3 || tr.Records[2].Turn == nil || tr.Records[2].Turn.Prompt != "two" {
		t.Fatalf("runs.get_trace on B: %+v", tr)
	}
	err = hostB.Call(ctx, protocol.MethodRunsSubscribe, map[string]any{"run_id": started.RunID}, nil)
	if err == nil || !strings.Contains(err.Error(), "subscribe through a connection to that daemon") {
		t.Fatalf("runs.subscribe on B to A's run in progress: %v", err)
	}

	// The operator revokes through B; alice's connection on A closes.
	out, errOut, code = agentsCommand(t, []string{"CAR_HOME=" + b.home}, "revoke", "alice")
	if code != exitOK || !strings.Contains(out, "revoked agent alice's token") {
		t.Fatalf("revoke through B: exit %d %q %s", code, out, errOut)
	}
	select {
	case <-alice.Done():
	case <-ctx.Done():
		t.Fatal("alice's connection on A stayed open after the revoke on B")
	}
	if _, err := client.Dial(ctx, "ws://"+a.addr+"/", &client.Options{Token: token, AgentID: "alice"}); err == nil || !strings.Contains(err.Error(), "token mismatch") {
		t.Fatalf("alice binding on A after the revoke: %v", err)
	}
	out, errOut, code = agentsCommand(t, operator, "list", "--json")
	var listed struct {
		Agents []agents.IssuedAgent `json:"agents"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &listed) != nil || len(listed.Agents) != 1 || listed.Agents[0].AgentID != "bob" {
		t.Fatalf("agents list after the revoke: exit %d %q %s", code, out, errOut)
	}
	// Without a daemon to go through, the command revokes in the database.
	if out, errOut, code := agentsCommand(t, operator, "revoke", "bob"); code != exitOK || !strings.Contains(out, "revoked agent bob's token") {
		t.Fatalf("revoke without a daemon: exit %d %q %s", code, out, errOut)
	}
}

// TestAgentsCommandOnAnUnreachableDatabase: exit 3, the password hidden;
// a misspelled command is a usage error before the database is tried.
func TestAgentsCommandOnAnUnreachableDatabase(t *testing.T) {
	env := []string{"CAR_HOME=" + t.TempDir(), "CAR_STORE=postgres", fmt.Sprintf("CAR_POSTGRES_URL=postgres://car:s3cret@127.0.0.1:%d/car", closedPort(t))}
	for _, args := range [][]string{{"issue-tokens", "alice"}, {"list", "alice"}, {"revoke"}} {
		out, errOut, code := agentsCommand(t, env, args...)
		if code != exitUsage || !strings.Contains(errOut, "car-server agents issue-token AGENT_ID") || strings.Contains(errOut, "PostgreSQL") {
			t.Fatalf("agents %v: exit %d %q %s", args, code, out, errOut)
		}
	}
	for _, args := range [][]string{{"issue-token", "alice"}, {"list"}, {"revoke", "alice"}} {
		out, errOut, code := agentsCommand(t, env, args...)
		if code != exitUnreachable || !strings.Contains(errOut, "cannot reach PostgreSQL") || strings.Contains(out+errOut, "s3cret") {
			t.Fatalf("agents %v on an unreachable database: exit %d %q %s", args, code, out, errOut)
		}
	}
}
