package rpc

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/checkpoint"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/file"
	"github.com/parslee-ai/car-server/internal/testwait"
	"github.com/parslee-ai/car-server/protocol"
)

// issueFor mints agent's token admitting tenants.
func (rs *runsServer) issueFor(t *testing.T, agent string, tenants ...string) string {
	t.Helper()
	token := "tenant-token-of-" + agent + "-" + strings.Join(tenants, ",")
	if err := file.IssueToken(context.Background(), rs.tokenPath(), agent, token, tenants...); err != nil {
		t.Fatal(err)
	}
	return token
}

func (rs *runsServer) tokenPath() string { return filepath.Join(rs.home, "agent-tokens.json") }

// tenantCalls are the calls that name a tenant, each as it names tenant.
func tenantCalls(tenant string) []struct {
	method string
	params map[string]any
} {
	return []struct {
		method string
		params map[string]any
	}{
		{protocol.MethodStateSet, map[string]any{"key": "k", "value": 1, "tenant_id": tenant}},
		{protocol.MethodStateGet, map[string]any{"key": "k", "tenant_id": tenant}},
		{protocol.MethodStateExists, map[string]any{"key": "k", "tenant_id": tenant}},
		{protocol.MethodStateKeys, map[string]any{"tenant_id": tenant}},
		{protocol.MethodStateSnapshot, map[string]any{"tenant_id": tenant}},
		{protocol.MethodCheckpointSave, map[string]any{"tenant_id": tenant}},
		{protocol.MethodProposalSubmit, map[string]any{"proposal": proposal(stateWrite("w", "k", 2)), "scope": map[string]any{"tenantId": tenant}}},
	}
}

// wantTenantRefused checks that every call naming tenant is refused to c
// with -32003 naming the tenant, the agent and how to grant it.
func wantTenantRefused(t *testing.T, c *client.Client, agent, tenant string) {
	t.Helper()
	for _, tc := range tenantCalls(tenant) {
		code, msg := rpcCode(t, c.Call(ctxT(t), tc.method, tc.params, nil))
		if code != protocol.CodeApprovalDenied || !strings.Contains(msg, tc.method) || !strings.Contains(msg, "tenant \""+tenant+"\"") ||
			!strings.Contains(msg, "agent "+agent) || !strings.Contains(msg, "car-server agents issue-token "+agent) || !strings.Contains(msg, "--tenant "+tenant) {
			t.Errorf("%s on tenant %q from agent %s: %d %q; want -32003 naming the tenant, the agent and --tenant", tc.method, tenant, agent, code, msg)
		}
	}
}

// submitScoped submits a proposal writing key in tenant's namespace.
func submitScoped(t *testing.T, c *client.Client, tenant, key string, value any) protocol.ProposalResult {
	t.Helper()
	var res protocol.ProposalResult
	call(t, c, protocol.MethodProposalSubmit, map[string]any{"proposal": proposal(stateWrite("w", key, value)), "scope": map[string]any{"tenantId": tenant}}, &res)
	if statuses(res)["w"] != protocol.StatusSucceeded {
		t.Fatalf("the write in tenant %q: %+v", tenant, res)
	}
	return res
}

func TestAnAgentIsHeldToItsTokensTenants(t *testing.T) {
	rs := startRunsServer(t, runsSetup{})
	trustAgents(t, rs)
	alice, err := rs.dialAgent(t, "alice", rs.issueFor(t, "alice", "a"))
	if err != nil {
		t.Fatal(err)
	}
	call(t, alice, protocol.MethodStateSet, map[string]any{"key": "k", "value": "mine", "tenant_id": "a"}, nil)
	var got any
	call(t, alice, protocol.MethodStateGet, map[string]any{"key": "k", "tenant_id": "a"}, &got)
	if got != "mine" {
		t.Fatalf("state.get in alice's own tenant = %v", got)
	}
	submitScoped(t, alice, "a", "p", 1)

	// Another tenant, and the default one, which --tenant a does not admit.
	plain := rs.dial(t, "")
	call(t, plain, protocol.MethodStateSet, map[string]any{"key": "k", "value": "theirs", "tenant_id": "b"}, nil)
	wantTenantRefused(t, alice, "alice", "b")
	code, msg := rpcCode(t, alice.Call(ctxT(t), protocol.MethodStateGet, map[string]any{"key": "k"}, nil))
	if code != protocol.CodeApprovalDenied || !strings.Contains(msg, "the default tenant") || !strings.Contains(msg, "--tenant ''") {
		t.Fatalf("state.get in the default tenant from an agent of tenant a: %d %q", code, msg)
	}
	code, msg = rpcCode(t, alice.Call(ctxT(t), protocol.MethodCheckpointSave, nil, nil))
	if code != protocol.CodeApprovalDenied || !strings.Contains(msg, "every tenant") {
		t.Fatalf("checkpoint.save of every tenant from an agent: %d %q", code, msg)
	}
	// Nothing of the refused calls reached tenant b.
	call(t, plain, protocol.MethodStateGet, map[string]any{"key": "k", "tenant_id": "b"}, &got)
	if got != "theirs" {
		t.Fatalf("tenant b's value after alice's refused calls = %v", got)
	}
}

func TestAnAgentWithoutTenantsHasTheDefaultTenantOnly(t *testing.T) {
	rs := startRunsServer(t, runsSetup{})
	trustAgents(t, rs)
	bob := rs.mustAgent(t, "bob")
	call(t, bob, protocol.MethodStateSet, map[string]any{"key": "k", "value": 1}, nil)
	call(t, bob, protocol.MethodStateSet, map[string]any{"key": "k2", "value": 1, "tenant_id": ""}, nil)
	submitScoped(t, bob, "", "p", 1)
	for _, tenant := range []string{"a", "default", "other tenant"} {
		for _, tc := range tenantCalls(tenant) {
			code, msg := rpcCode(t, bob.Call(ctxT(t), tc.method, tc.params, nil))
			if code != protocol.CodeApprovalDenied || !strings.Contains(msg, "bob") || !strings.Contains(msg, "(default)") {
				t.Errorf("%s on tenant %q from an agent without tenants: %d %q", tc.method, tenant, code, msg)
			}
		}
	}
}

func TestAPlainClientIsNotHeldToTenants(t *testing.T) {
	rs := startRunsServer(t, runsSetup{})
	plain := rs.dial(t, "")
	for _, tenant := range []string{"", "a", "b"} {
		call(t, plain, protocol.MethodStateSet, map[string]any{"key": "k", "value": tenant, "tenant_id": tenant}, nil)
		var got any
		call(t, plain, protocol.MethodStateGet, map[string]any{"key": "k", "tenant_id": tenant}, &got)
		if got != tenant {
			t.Fatalf("a plain client's state.get in tenant %q = %v", tenant, got)
		}
		submitScoped(t, plain, tenant, "p", 1)
	}
	// The host role is not held to tenants either.
	call(t, rs.hostClient(t), protocol.MethodStateGet, map[string]any{"key": "k", "tenant_id": "b"}, nil)
}

// closed waits for c's connection to be closed by the daemon.
func closed(t *testing.T, c *client.Client, what string) {
	t.Helper()
	testwait.Eventually(t, testTimeout, what, func() bool {
		select {
		case <-c.Done():
			return true
		default:
			return false
		}
	})
}

// A revoke that never reaches the daemon (the command found no socket,
// or someone edited the file) still closes the agent's connection.
func TestEditingTheTokenFileClosesARevokedAgentsConnection(t *testing.T) {
	rs := startRunsServer(t, runsSetup{})
	token := rs.issue(t, "alice")
	keep := rs.mustAgent(t, "keeper")
	alice, err := rs.dialAgent(t, "alice", token)
	if err != nil {
		t.Fatal(err)
	}
	// As car-server agents revoke does when no daemon answers.
	if ok, err := file.RevokeToken(context.Background(), rs.tokenPath(), "alice"); !ok || err != nil {
		t.Fatalf("revoke in the file: %v %v", ok, err)
	}
	closed(t, alice, "the revoked agent's connection closing")
	if _, err := rs.dialAgent(t, "alice", token); err == nil {
		t.Fatal("a revoked token binds")
	}

	// An edit in place, as an editor would make it: the file rewritten
	// without bob.
	bob, err := rs.dialAgent(t, "bob", rs.issue(t, "bob"))
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(rs.tokenPath())
	if err != nil {
		t.Fatal(err)
	}
	after := strings.Replace(string(before), `"bob"`, `"bob-gone"`, 1)
	if after == string(before) {
		t.Fatalf("the token file does not name bob: %s", before)
	}
	if err := os.WriteFile(rs.tokenPath(), []byte(after), 0o600); err != nil {
		t.Fatal(err)
	}
	closed(t, bob, "the connection of an agent edited out of the file closing")
	// Agents whose tokens still hold keep their connections.
	call(t, keep, protocol.MethodStateKeys, nil, nil)
}

// A re-issue replaces the token: the connection bound with the old one is
// closed, and the new token's tenants are in force on the next.
func TestReissuingWithFewerTenantsClosesTheConnection(t *testing.T) {
	rs := startRunsServer(t, runsSetup{})
	old, err := rs.dialAgent(t, "alice", rs.issueFor(t, "alice", "a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	call(t, old, protocol.MethodStateSet, map[string]any{"key": "k", "value": 1, "tenant_id": "b"}, nil)
	token := rs.issueFor(t, "alice", "a")
	closed(t, old, "the connection bound with the replaced token closing")
	now, err := rs.dialAgent(t, "alice", token)
	if err != nil {
		t.Fatal(err)
	}
	call(t, now, protocol.MethodStateSet, map[string]any{"key": "k", "value": 1, "tenant_id": "a"}, nil)
	wantTenantRefused(t, now, "alice", "b")
}

// revokingTokens revokes an agent's token right after its first Grant
// said yes, as a revoke landing between the bind's first look and the
// binding would, and watches nothing: only the second look can see it.
type revokingTokens struct {
	store.AgentTokens
	mu     sync.Mutex
	grants int
}

func (r *revokingTokens) Grant(ctx context.Context, agentID, token string) ([]string, bool, error) {
	tenants, ok, err := r.AgentTokens.Grant(ctx, agentID, token)
	r.mu.Lock()
	r.grants++
	first := r.grants == 1
	r.mu.Unlock()
	if first && ok {
		if _, err := r.AgentTokens.Revoke(ctx, agentID); err != nil {
			return nil, false, err
		}
	}
	return tenants, ok, err
}

func (r *revokingTokens) Watch(func(string)) func() { return func() {} }

func TestARevokeBetweenVerifyAndBindingIsSeen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent-tokens.json")
	tokens := &revokingTokens{AgentTokens: file.TokenFile(path)}
	ts := startServer(t, Options{AgentTokens: tokens})
	if err := tokens.Issue(ctxT(t), "alice", "first"); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Dial(ctxT(t), ts.url, &client.Options{Token: "first", AgentID: "alice"}); err == nil || !strings.Contains(err.Error(), "token mismatch for agent 'alice'") {
		t.Fatalf("a bind whose token was revoked before it was bound: %v", err)
	}
	// The failed bind left no binding behind: a new token binds.
	if err := tokens.Issue(ctxT(t), "alice", "second"); err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(ctxT(t), ts.url, &client.Options{Token: "second", AgentID: "alice"})
	if err != nil {
		t.Fatalf("a bind after the refused one: %v", err)
	}
	c.Close()
}

// armedTokens revokes an agent's token right after the first Grant that
// says yes once armed, and watches nothing: a revoke landing between the
// two looks of a session.auth on a connection already bound.
type armedTokens struct {
	store.AgentTokens
	armed atomic.Bool
}

func (r *armedTokens) Grant(ctx context.Context, agentID, token string) ([]string, bool, error) {
	tenants, ok, err := r.AgentTokens.Grant(ctx, agentID, token)
	if ok && r.armed.CompareAndSwap(true, false) {
		if _, err := r.AgentTokens.Revoke(ctx, agentID); err != nil {
			return nil, false, err
		}
	}
	return tenants, ok, err
}

func (r *armedTokens) Watch(func(string)) func() { return func() {} }

// A bound connection whose session.auth again loses its token between the
// two looks is closed: dropping only the binding would leave it open as a
// plain client, ungoverned, though it never presented the daemon's token.
func TestARevokeDuringAReauthClosesTheBoundConnection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent-tokens.json")
	tokens := &armedTokens{AgentTokens: file.TokenFile(path)}
	ts := startServer(t, Options{Token: testToken, AgentTokens: tokens})
	if err := tokens.Issue(ctxT(t), "alice", "alice-token"); err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(ctxT(t), ts.url, &client.Options{Token: "alice-token", AgentID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tokens.armed.Store(true)
	err = c.Call(ctxT(t), protocol.MethodSessionAuth, protocol.AuthParams{Token: "alice-token", AgentID: "alice"}, nil)
	if err == nil || !strings.Contains(err.Error(), "token mismatch for agent 'alice'") {
		t.Fatalf("a re-auth whose token was revoked between the looks: %v, want the token mismatch", err)
	}
	closed(t, c, "the connection whose token was revoked during its re-auth closing")
}

// TestAnAgentListsOnlyItsTenantsCheckpoints: checkpoint.list shows an
// agent the checkpoints of the tenants its token admits, never another
// tenant's, nor one of every tenant; a plain client sees them all.
func TestAnAgentListsOnlyItsTenantsCheckpoints(t *testing.T) {
	dir := t.TempDir()
	cps, err := checkpoint.Open(filepath.Join(dir, "checkpoints"), 10, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	tokens := file.TokenFile(filepath.Join(dir, "agent-tokens.json"))
	ts := startServerWith(t, serverSetup{opts: Options{AgentTokens: tokens}, engine: engine.Options{Checkpoints: cps}})
	if err := tokens.Issue(ctxT(t), "alice", "alice-token", "a"); err != nil {
		t.Fatal(err)
	}
	plain := ts.dial(t, "")
	for _, p := range []map[string]any{{"name": "of-a", "tenant_id": "a"}, {"name": "of-b", "tenant_id": "b"}, {"name": "of-all"}} {
		call(t, plain, protocol.MethodCheckpointSave, p, nil)
	}
	names := func(c *client.Client) []string {
		var res protocol.CheckpointListResult
		call(t, c, protocol.MethodCheckpointList, nil, &res)
		var out []string
		for _, cp := range res.Checkpoints {
			out = append(out, cp.Name)
		}
		slices.Sort(out)
		return out
	}
	alice, err := client.Dial(ctxT(t), ts.url, &client.Options{Token: "alice-token", AgentID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	if got := names(alice); !slices.Equal(got, []string{"of-a"}) {
		t.Errorf("agent alice of tenant a lists %v, want [of-a]", got)
	}
	if got := names(plain); !slices.Equal(got, []string{"of-a", "of-all", "of-b"}) {
		t.Errorf("a plain client lists %v, want every checkpoint", got)
	}
}
