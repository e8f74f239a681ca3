package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/agents"
	"github.com/parslee-ai/car-server/internal/store/file"
	"github.com/parslee-ai/car-server/internal/testwait"
	"github.com/parslee-ai/car-server/protocol"
)

func TestConcurrentIssueTokenCommandsKeepEveryAgent(t *testing.T) {
	home := t.TempDir()
	const issuers = 8
	tokens := make([]string, issuers)
	errs := make([]error, issuers)
	var wg sync.WaitGroup
	for i := range tokens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tokens[i], errs[i] = runIssueToken(home, fmt.Sprint("agent-", i))
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(binary, "agents", "list", "--json")
	cmd.Env = append(os.Environ(), "CAR_HOME="+home)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("agents list: %v", err)
	}
	var list struct {
		Agents []agents.IssuedAgent `json:"agents"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("agents list --json printed %q: %v", out, err)
	}
	if len(list.Agents) != issuers {
		t.Fatalf("%d concurrent issue-token commands left %d agents: %s", issuers, len(list.Agents), out)
	}
	for i, token := range tokens {
		ok, err := file.VerifyToken(filepath.Join(home, "agent-tokens.json"), fmt.Sprint("agent-", i), token)
		if err != nil || !ok {
			t.Errorf("agent-%d's printed token does not verify: %v", i, err)
		}
	}
}

// An agent issued --tenant a is held to tenant a by the running daemon; a
// plain client is not; a revoke the command makes without reaching the
// daemon (no socket answers) still closes the agent's connection.
func TestAgentTenantsAndARevokeTheDaemonNeverHears(t *testing.T) {
	home := t.TempDir()
	d := startDaemon(t, home)
	env := []string{"CAR_HOME=" + home}
	out, errOut, code := agentsCommand(t, env, "issue-token", "alice", "--tenant", "a")
	if code != exitOK {
		t.Fatalf("issue-token --tenant a: exit %d %s", code, errOut)
	}
	token := strings.TrimSpace(out)
	if out, errOut, code := agentsCommand(t, env, "list", "--tenant", "a"); code != exitUsage || !strings.Contains(errOut, "--tenant belongs to issue-token") {
		t.Fatalf("list --tenant: exit %d %q %q", code, out, errOut)
	}
	out, errOut, code = agentsCommand(t, env, "list", "--json")
	var list struct {
		Agents []agents.IssuedAgent `json:"agents"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &list) != nil || len(list.Agents) != 1 || !slices.Equal(list.Agents[0].Tenants, []string{"a"}) {
		t.Fatalf("list --json: exit %d %q %s", code, out, errOut)
	}
	if out, _, _ := agentsCommand(t, env, "list"); !strings.Contains(out, "TENANTS") || !strings.Contains(out, "alice") {
		t.Fatalf("list: %q", out)
	}

	alice, err := client.Dial(ctxT(t), "ws://"+d.addr+"/", &client.Options{Token: token, AgentID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	if err := alice.Call(ctxT(t), protocol.MethodStateSet, map[string]any{"key": "k", "value": 1, "tenant_id": "a"}, nil); err != nil {
		t.Fatalf("state.set in alice's tenant: %v", err)
	}
	for _, c := range []struct {
		method string
		params map[string]any
	}{
		{protocol.MethodStateSet, map[string]any{"key": "k", "value": 1, "tenant_id": "b"}},
		{protocol.MethodStateGet, map[string]any{"key": "k", "tenant_id": "b"}},
		{protocol.MethodStateGet, map[string]any{"key": "k"}},
		{protocol.MethodProposalSubmit, map[string]any{"scope": map[string]any{"tenantId": "b"},
			"proposal": map[string]any{"actions": []any{map[string]any{"id": "w", "type": "state_write", "parameters": map[string]any{"key": "k", "value": 2}}}}}},
	} {
		var rerr *jsonrpc2.Error
		if err := alice.Call(ctxT(t), c.method, c.params, nil); !errors.As(err, &rerr) || rerr.Code != protocol.CodeApprovalDenied ||
			!strings.Contains(rerr.Message, "agent alice may not use") || !strings.Contains(rerr.Message, "car-server agents issue-token alice --tenant a") {
			t.Errorf("%s %v from alice: %v; want -32003 naming the tenant, the agent and how to grant it", c.method, c.params, err)
		}
	}
	plain := d.dial(t)
	defer plain.Close()
	if err := plain.Call(ctxT(t), protocol.MethodStateSet, map[string]any{"key": "k", "value": 1, "tenant_id": "b"}, nil); err != nil {
		t.Fatalf("a plain client's state.set in tenant b: %v", err)
	}

	// The command finds no daemon on the socket it is pointed at, and
	// revokes in the token file.
	away := append(env, "CAR_SERVER_SOCKET="+filepath.Join(t.TempDir(), "nobody.sock"))
	out, errOut, code = agentsCommand(t, away, "revoke", "alice")
	if code != exitOK || !strings.Contains(out, "revoked agent alice's token; no daemon answered") {
		t.Fatalf("revoke without reaching the daemon: exit %d %q %s", code, out, errOut)
	}
	testwait.Eventually(t, waitLimit, "the daemon closing the revoked agent's connection", func() bool {
		select {
		case <-alice.Done():
			return true
		default:
			return false
		}
	})
	d.waitLog(t, "closing the connection of a revoked agent")
}
