package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/host"
	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/internal/rpc"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/file"
	"github.com/parslee-ai/car-server/internal/testwait"
	"github.com/parslee-ai/car-server/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testTimeout bounds every wait; a hang guard, not a performance bound.
const testTimeout = 30 * time.Second

const (
	plainToken = "plain-token-for-tests"
	hostToken  = "host-token-for-tests"
	scoutToken = "scout-agent-token"
)

// fakeTool is a daemon tool run in the test: it answers with what it was
// given, as an MCP server's CallToolResult, and counts its calls.
type fakeTool struct {
	calls   atomic.Int64
	started chan struct{} // when set, receives once per call as it starts
	release chan struct{} // when set, the call waits for it
}

func (f *fakeTool) ExecuteTool(ctx context.Context, call engine.ToolCall) (any, error) {
	f.calls.Add(1)
	if f.started != nil {
		f.started <- struct{}{}
	}
	if f.release != nil {
		select {
		case <-f.release:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	b, _ := json.Marshal(call.Parameters)
	return map[string]any{
		"content":           []any{map[string]any{"type": "text", "text": "echo " + string(b)}},
		"structuredContent": map[string]any{"echo": call.Parameters},
	}, nil
}

// postures stands for agents.Postures: the agent scout may not take
// full_access actions; everyone else falls through to the tiers.
type postures struct{}

func (postures) Resolve(agent string, t policy.Tier) (string, bool) {
	if agent == "scout" && t == policy.FullAccess {
		return engine.PostureDeny, true
	}
	return "", false
}

type fixture struct {
	url    string
	rt     *engine.Runtime
	srv    *rpc.Server
	mcp    *Server
	tokens store.AgentTokens
	read   *fakeTool
	write  *fakeTool
}

// The classifications a connector gives: readOnlyHint true is read_only,
// no annotations full_access.
var (
	readOnly   = &policy.Classification{Tier: policy.ReadOnly, Reversibility: protocol.Reversible, Signals: []string{"readOnlyHint"}}
	fullAccess = &policy.Classification{Tier: policy.FullAccess, Reversibility: protocol.Irreversible, Signals: []string{"no annotations"}}
)

// start serves the endpoint over a real runtime and rpc server, with three
// daemon tools of the connector "fake": read (read_only), write
// (full_access: needs a person under the default tier) and banned (denied
// by an operator policy), and an approver watching the desk.
func start(t *testing.T, opts Options) *fixture {
	t.Helper()
	home := t.TempDir()
	ledger, _, err := file.OpenApprovals(filepath.Join(home, "approvals.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	idem, _, err := file.OpenIdempotency(filepath.Join(home, "idempotency.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	desk := host.New(host.Options{})
	f := &fixture{read: &fakeTool{}, write: &fakeTool{}, tokens: file.TokenFile(filepath.Join(home, "agent-tokens.json"))}
	if err := f.tokens.Issue(context.Background(), "scout", scoutToken); err != nil {
		t.Fatal(err)
	}
	dt := engine.NewDaemonTools(engine.SchemaLimits{})
	schema := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)
	if err := dt.Set("fake", []engine.DaemonTool{
		{Schema: protocol.ToolSchema{Name: "mcp_fake_read", Description: "reads", Parameters: schema}, Source: "mcp", Class: readOnly,
			Annotations: json.RawMessage(`{"readOnlyHint":true,"title":"Read a file"}`), Exec: f.read},
		{Schema: protocol.ToolSchema{Name: "mcp_fake_write", Description: "writes", Parameters: schema}, Source: "mcp", Class: fullAccess, Exec: f.write},
		{Schema: protocol.ToolSchema{Name: "mcp_fake_banned", Description: "banned", Parameters: schema}, Source: "mcp", Exec: f.read},
	}); err != nil {
		t.Fatal(err)
	}
	f.rt = engine.NewRuntime(engine.Options{
		State: file.NewState(), DaemonTools: dt, Approvals: ledger, Desk: desk, Idempotency: idem,
		ApprovalTimeout: testTimeout, Postures: postures{}, RetryBase: time.Millisecond,
	})
	f.rt.SetOperatorPolicies(policy.NewEngine(policy.Policy{Name: "deny_tool:mcp_fake_banned", Rule: policy.DenyTool{Tool: "mcp_fake_banned"}}))
	desk.Subscribe("approver", true, func(host.Event) {})
	f.srv = rpc.NewServer(f.rt, rpc.Options{Token: plainToken, HostToken: hostToken, AgentTokens: f.tokens})
	opts.Gateway = f.srv
	opts.TokenHint = "/run/car/auth-token"
	f.mcp = New(opts)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: f.mcp.Handler(l)}
	go func() { _ = hs.Serve(l) }()
	f.url = "http://" + l.Addr().String() + Path
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		f.mcp.Close()
		_ = hs.Shutdown(ctx)
		if err := f.srv.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		f.rt.Close()
		_ = ledger.Close()
		_ = idem.Close()
	})
	return f
}

// bearerRT adds the bearer token to every request.
type bearerRT = bearerTransport

// connect opens an MCP session with token; progress hears the session's
// progress notifications.
func (f *fixture) connect(t *testing.T, token string, progress func(*mcp.ProgressNotificationClientRequest)) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		if progress != nil {
			progress(r)
		}
	}})
	tr := &mcp.StreamableClientTransport{Endpoint: f.url, HTTPClient: &http.Client{Transport: bearerRT{token: token}}, DisableStandaloneSSE: true}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cs, err := c.Connect(ctx, tr, nil)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

func (f *fixture) mustConnect(t *testing.T, token string) *mcp.ClientSession {
	t.Helper()
	cs, err := f.connect(t, token, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	return cs
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func names(tools []*mcp.Tool) []string {
	out := make([]string, len(tools))
	for i, t := range tools {
		out[i] = t.Name
	}
	return out
}

func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestHealthAnswersOkWithoutAToken(t *testing.T) {
	f := start(t, Options{})
	resp, err := http.Get(strings.TrimSuffix(f.url, Path) + HealthPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		t.Fatalf("health = %d %q, want 200 ok", resp.StatusCode, body)
	}
}

// post sends one initialize request with the given headers and returns
// the status, the WWW-Authenticate header and the body.
func post(t *testing.T, url string, header map[string]string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), string(body)
}

func TestAMissingOrWrongTokenIs401SayingWhereTheTokenIs(t *testing.T) {
	f := start(t, Options{})
	for name, header := range map[string]map[string]string{
		"none":       {},
		"wrong":      {"Authorization": "Bearer not-a-token"},
		"host token": {"Authorization": "Bearer " + hostToken},
		"not bearer": {"Authorization": "Basic " + plainToken},
	} {
		status, challenge, body := post(t, f.url, header)
		if status != http.StatusUnauthorized || !strings.HasPrefix(challenge, "Bearer ") || !strings.Contains(body, "/run/car/auth-token") || !strings.Contains(body, "issue-token") {
			t.Errorf("%s: %d, WWW-Authenticate %q, body %q; want 401, a Bearer challenge and a body naming the token file and issue-token", name, status, challenge, body)
		}
	}
	if _, err := f.connect(t, "not-a-token", nil); err == nil {
		t.Fatal("the SDK client connected with a wrong token")
	}
	if status, _, body := post(t, f.url, map[string]string{"Authorization": "Bearer " + plainToken}); status != http.StatusOK {
		t.Fatalf("the daemon's token: %d %q, want 200", status, body)
	}
}

func TestForeignHostAndOriginAreRefused(t *testing.T) {
	f := start(t, Options{})
	auth := "Bearer " + plainToken
	if status, _, body := post(t, f.url, map[string]string{"Authorization": auth, "Origin": "http://evil.example"}); status != http.StatusForbidden || !strings.Contains(body, "allowed_origins") {
		t.Fatalf("foreign Origin: %d %q, want 403 naming allowed_origins", status, body)
	}
	req, _ := http.NewRequest(http.MethodGet, strings.TrimSuffix(f.url, Path)+HealthPath, nil)
	req.Host = "evil.example"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("foreign Host: %d, want 403", resp.StatusCode)
	}
	g := start(t, Options{AllowedOrigins: []string{"app.example"}})
	if status, _, body := post(t, g.url, map[string]string{"Authorization": auth, "Origin": "https://app.example"}); status != http.StatusOK {
		t.Fatalf("an allowed Origin: %d %q, want 200", status, body)
	}
}

func TestToolsListIsWhatThePrincipalMayCall(t *testing.T) {
	f := start(t, Options{})
	plain := f.mustConnect(t, plainToken)
	res, err := plain.ListTools(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	// banned: an operator policy denies every call of it. messaging.send:
	// no delivery channel over MCP.
	if got := strings.Join(names(res.Tools), ","); got != "mcp_fake_read,mcp_fake_write" {
		t.Fatalf("plain client's tools = %s, want mcp_fake_read,mcp_fake_write", got)
	}
	read := res.Tools[0]
	if read.Meta[TierMetaKey] != "read_only" || res.Tools[1].Meta[TierMetaKey] != "full_access" {
		t.Fatalf("tiers = %v, %v; want read_only and full_access", read.Meta[TierMetaKey], res.Tools[1].Meta[TierMetaKey])
	}
	if read.Annotations == nil || !read.Annotations.ReadOnlyHint || read.Annotations.Title != "Read a file" {
		t.Fatalf("read's annotations = %+v, want the provider's (readOnlyHint, title)", read.Annotations)
	}
	if s, _ := json.Marshal(read.InputSchema); !strings.Contains(string(s), `"path"`) {
		t.Fatalf("read's input schema = %s, want the tool's", s)
	}
	// The agent scout's posture denies full_access: write cannot run for it.
	scout := f.mustConnect(t, scoutToken)
	res, err = scout.ListTools(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names(res.Tools), ","); got != "mcp_fake_read" {
		t.Fatalf("agent scout's tools = %s, want mcp_fake_read", got)
	}
}

func TestAGovernedCallRunsAndIsRecorded(t *testing.T) {
	f := start(t, Options{})
	cs := f.mustConnect(t, scoutToken)
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp_fake_read", Arguments: map[string]any{"path": "a.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || text(res) != `echo {"path":"a.txt"}` {
		t.Fatalf("result = %+v %q, want the tool's content", res, text(res))
	}
	if s, _ := json.Marshal(res.StructuredContent); string(s) != `{"echo":{"path":"a.txt"}}` {
		t.Fatalf("structured content = %s, want the tool's", s)
	}
	pid, _ := res.Meta["car-server/proposal_id"].(string)
	events := f.rt.Events.Query(engine.EventQuery{ProposalID: pid, Kinds: []engine.EventKind{engine.EventProposalReceived, engine.EventActionSucceeded}})
	if len(events) != 2 {
		t.Fatalf("events of %s = %+v, want proposal_received and action_succeeded", pid, events)
	}
	for _, e := range events {
		if e.Data["agent"] != "scout" || !strings.HasPrefix(e.Connection, "mcp-") {
			t.Fatalf("event %+v does not name the agent and the MCP session", e)
		}
		if e.Kind == engine.EventProposalReceived && e.Data["source"] != "mcp" {
			t.Fatalf("proposal_received source = %v, want mcp", e.Data["source"])
		}
	}
	if f.read.calls.Load() != 1 {
		t.Fatalf("the tool ran %d times, want 1", f.read.calls.Load())
	}
}

func TestARefusedCallIsAToolErrorNamingWhy(t *testing.T) {
	f := start(t, Options{})
	plain := f.mustConnect(t, plainToken)
	res, err := plain.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp_fake_banned", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(text(res), "denied by operator policy 'deny_tool:mcp_fake_banned'") {
		t.Fatalf("banned: %+v %q, want isError naming the policy", res, text(res))
	}
	scout := f.mustConnect(t, scoutToken)
	res, err = scout.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp_fake_write", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(text(res), "agent 'scout' may not take full_access actions") {
		t.Fatalf("write by scout: %+v %q, want isError naming the posture", res, text(res))
	}
	// An unknown tool is a protocol fault.
	_, err = plain.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp_fake_nope"})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams || !strings.Contains(je.Message, "unknown tool 'mcp_fake_nope'") {
		t.Fatalf("unknown tool: %v, want a JSON-RPC invalid params error", err)
	}
	if n := f.read.calls.Load() + f.write.calls.Load(); n != 0 {
		t.Fatalf("refused calls ran %d tools", n)
	}
}

// waitForApproval calls write with a progress token and returns the
// approval id the progress notification names, and the call's outcome.
func waitForApproval(t *testing.T, f *fixture, token string) (string, <-chan *mcp.CallToolResult) {
	t.Helper()
	ids := make(chan string, 4)
	cs, err := f.connect(t, token, func(r *mcp.ProgressNotificationClientRequest) {
		if id, ok := r.Params.Meta["car-server/approval_id"].(string); ok && strings.Contains(r.Params.Message, "waiting for a person to approve") {
			ids <- id
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "mcp_fake_write", Arguments: map[string]any{"path": "b.txt"}}
		p.SetProgressToken("tok-1")
		res, err := cs.CallTool(context.Background(), p)
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "call failed: " + err.Error()}}}
		}
		done <- res
	}()
	select {
	case id := <-ids:
		return id, done
	case res := <-done:
		t.Fatalf("the call returned before it waited for a person: %q", text(res))
	case <-time.After(testTimeout):
		t.Fatal("no progress notification named the approval")
	}
	return "", nil
}

func TestACallWaitsForAPersonAndThenReturnsTheResult(t *testing.T) {
	f := start(t, Options{})
	id, done := waitForApproval(t, f, plainToken)
	pending := f.rt.Desk().Approvals()
	if len(pending) != 1 || pending[0].ID != id || pending[0].RequestedBy == nil || !strings.HasPrefix(pending[0].RequestedBy.Connection, "mcp-") || pending[0].RequestedBy.ClientName != "test-client" {
		t.Fatalf("the desk shows %+v, want approval %s asked by the MCP session of test-client", pending, id)
	}
	if _, err := f.rt.ResolveApproval("person", engineDecision(id)); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if res.IsError || text(res) != `echo {"path":"b.txt"}` {
			t.Fatalf("after the approval: %+v %q, want the tool's result", res, text(res))
		}
	case <-time.After(testTimeout):
		t.Fatal("the call did not return after the approval")
	}
}

func TestARejectedApprovalIsAToolError(t *testing.T) {
	f := start(t, Options{})
	id, done := waitForApproval(t, f, plainToken)
	if _, err := f.rt.ResolveApproval("person", engine.Decision{ApprovalID: id, Approved: false, Reviewer: "conn:person", Notes: "not today"}); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if !res.IsError || !strings.Contains(text(res), "not today") {
			t.Fatalf("after a rejection: %+v %q, want isError with the reviewer's reason", res, text(res))
		}
	case <-time.After(testTimeout):
		t.Fatal("the call did not return after the rejection")
	}
	if f.write.calls.Load() != 0 {
		t.Fatal("a rejected call ran the tool")
	}
}

func TestTheBodyIsBounded(t *testing.T) {
	f := start(t, Options{MaxBodyBytes: 512})
	big := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":%q}}`, strings.Repeat("x", 1024))
	req, _ := http.NewRequest(http.MethodPost, f.url, strings.NewReader(big))
	req.Header.Set("Authorization", "Bearer "+plainToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a 1 KiB body over a 512-byte bound: %d, want 413", resp.StatusCode)
	}
	if _, err := f.connect(t, plainToken, nil); err != nil {
		t.Fatalf("an ordinary session under the bound: %v", err)
	}
}

func TestSessionsPerPrincipalAreBounded(t *testing.T) {
	f := start(t, Options{MaxSessionsPerPrincipal: 1})
	first := f.mustConnect(t, plainToken)
	_, err := f.connect(t, plainToken, nil)
	if err == nil || !strings.Contains(err.Error(), "mcp_max_sessions_per_principal") {
		t.Fatalf("a second session of the plain client: %v, want the bound's error naming the setting", err)
	}
	// Another principal has room of its own.
	f.mustConnect(t, scoutToken)
	// Closing the first (DELETE) makes room, once the daemon has let the
	// session go.
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, testTimeout, "the closed session's place freed", func() bool { return f.mcp.SessionCount() == 1 })
	f.mustConnect(t, plainToken)
}

func TestCallsInFlightPerPrincipalAreBounded(t *testing.T) {
	f := start(t, Options{MaxCallsPerPrincipal: 1})
	f.read.started, f.read.release = make(chan struct{}, 1), make(chan struct{})
	a := f.mustConnect(t, plainToken)
	b := f.mustConnect(t, plainToken)
	first := make(chan error, 1)
	go func() {
		_, err := a.CallTool(context.Background(), &mcp.CallToolParams{Name: "mcp_fake_read", Arguments: map[string]any{}})
		first <- err
	}()
	select {
	case <-f.read.started:
	case <-time.After(testTimeout):
		t.Fatal("the first call did not start")
	}
	_, err := b.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp_fake_read", Arguments: map[string]any{}})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != CodeLimit || !strings.Contains(je.Message, "mcp_max_calls_per_principal") {
		t.Fatalf("a second call in flight: %v, want the bound's error naming the setting", err)
	}
	// Another principal is not held by the plain client's calls.
	scout := f.mustConnect(t, scoutToken)
	go func() { <-f.read.started }()
	close(f.read.release)
	if _, err := scout.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp_fake_read", Arguments: map[string]any{}}); err != nil {
		t.Fatalf("another principal's call: %v", err)
	}
	if err := <-first; err != nil {
		t.Fatalf("the first call: %v", err)
	}
}

func TestARevokedAgentIsRefused(t *testing.T) {
	f := start(t, Options{})
	cs := f.mustConnect(t, scoutToken)
	f.mustConnect(t, plainToken)
	if _, err := f.tokens.Revoke(context.Background(), "scout"); err != nil {
		t.Fatal(err)
	}
	// The token store's watch ends the agent's session, without a request.
	testwait.Eventually(t, testTimeout, "the revoked agent's session ended", func() bool { return f.mcp.SessionCount() == 1 })
	_, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp_fake_read", Arguments: map[string]any{}})
	if err == nil {
		t.Fatal("a call with a revoked token was served")
	}
	if status, _, _ := post(t, f.url, map[string]string{"Authorization": "Bearer " + scoutToken}); status != http.StatusUnauthorized {
		t.Fatalf("a new session with a revoked token: %d, want 401", status)
	}
	if f.read.calls.Load() != 0 {
		t.Fatal("a revoked agent's call ran the tool")
	}
}

// A session opened by one principal cannot be used with another's token.
func TestASessionStaysWithItsPrincipal(t *testing.T) {
	f := start(t, Options{})
	var sid string
	var mu sync.Mutex
	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	cs, err := c.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: f.url, HTTPClient: &http.Client{Transport: bearerRT{token: plainToken}}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	mu.Lock()
	sid = cs.ID()
	mu.Unlock()
	req, _ := http.NewRequest(http.MethodPost, f.url, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`))
	req.Header.Set("Authorization", "Bearer "+scoutToken)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", ProtocolRevision)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode < 400 {
		t.Fatalf("another principal's token on the plain client's session: %d, want a refusal", resp.StatusCode)
	}
}

// engineDecision is a person's approval of id.
func engineDecision(id string) engine.Decision {
	return engine.Decision{ApprovalID: id, Approved: true, Reviewer: "conn:person"}
}

// Drain (shutdown) refuses new calls and waits for the calls in flight.
func TestDrainWaitsForCallsInFlightAndRefusesNewOnes(t *testing.T) {
	f := start(t, Options{})
	f.read.started, f.read.release = make(chan struct{}, 1), make(chan struct{})
	a := f.mustConnect(t, plainToken)
	b := f.mustConnect(t, scoutToken)
	first := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := a.CallTool(context.Background(), &mcp.CallToolParams{Name: "mcp_fake_read", Arguments: map[string]any{}})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		first <- res
	}()
	select {
	case <-f.read.started:
	case <-time.After(testTimeout):
		t.Fatal("the first call did not start")
	}
	drained := make(chan struct{})
	go func() {
		f.mcp.Drain(ctxT(t))
		close(drained)
	}()
	testwait.Eventually(t, testTimeout, "the drain began", func() bool {
		f.mcp.mu.Lock()
		defer f.mcp.mu.Unlock()
		return f.mcp.draining
	})
	_, err := b.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp_fake_read", Arguments: map[string]any{}})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || !strings.Contains(je.Message, "shutting down") {
		t.Fatalf("a call while draining: %v, want a refusal saying the daemon is shutting down", err)
	}
	select {
	case <-drained:
		t.Fatal("the drain ended with a call in flight")
	default:
	}
	close(f.read.release)
	if res := <-first; res.IsError {
		t.Fatalf("the call in flight: %q", text(res))
	}
	select {
	case <-drained:
	case <-time.After(testTimeout):
		t.Fatal("the drain did not end once the call returned")
	}
}

// An agent's call runs in a tenant its token admits: the default one when
// it admits it, else its first.
func TestAnAgentsCallRunsInATenantItsTokenAdmits(t *testing.T) {
	f := start(t, Options{})
	if err := f.tokens.Issue(context.Background(), "ranger", "ranger-token", "b", "c"); err != nil {
		t.Fatal(err)
	}
	for token, want := range map[string]string{"ranger-token": "b", scoutToken: "", plainToken: ""} {
		cs := f.mustConnect(t, token)
		res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp_fake_read", Arguments: map[string]any{}})
		if err != nil || res.IsError {
			t.Fatalf("call: %v %q", err, text(res))
		}
		pid, _ := res.Meta["car-server/proposal_id"].(string)
		events := f.rt.Events.Query(engine.EventQuery{ProposalID: pid, Kinds: []engine.EventKind{engine.EventProposalReceived}})
		if len(events) != 1 || events[0].Data["tenant"] != want {
			t.Fatalf("the call of %s's token ran in %+v, want tenant %q", token, events, want)
		}
	}
}

// A call naming an idempotency key in _meta runs once for its principal:
// the repeat is answered with the first result; another principal's call
// with the same key runs.
func TestAnIdempotencyKeyAnswersTheRepeat(t *testing.T) {
	f := start(t, Options{})
	call := func(cs *mcp.ClientSession, path string) string {
		t.Helper()
		p := &mcp.CallToolParams{Name: "mcp_fake_read", Arguments: map[string]any{"path": path}, Meta: mcp.Meta{IdempotencyKeyMetaKey: "order-7"}}
		res, err := cs.CallTool(ctxT(t), p)
		if err != nil || res.IsError {
			t.Fatalf("call: %v %q", err, text(res))
		}
		return text(res)
	}
	plain := f.mustConnect(t, plainToken)
	first := call(plain, "a.txt")
	if again := call(plain, "b.txt"); again != first || f.read.calls.Load() != 1 {
		t.Fatalf("the repeat answered %q (first %q), the tool ran %d times; want the first result, one run", again, first, f.read.calls.Load())
	}
	if other := call(f.mustConnect(t, scoutToken), "c.txt"); other != `echo {"path":"c.txt"}` || f.read.calls.Load() != 2 {
		t.Fatalf("another principal's call with the key answered %q after %d runs; want its own run", other, f.read.calls.Load())
	}
}

// TestACallPassesTheIntentGate: an MCP tools/call is a proposal of one
// action, so the operator's intent judges it as any proposal: a forbidden
// tool is a tool error naming the intent, and never runs.
func TestACallPassesTheIntentGate(t *testing.T) {
	f := start(t, Options{})
	f.rt.SetOperatorIntent(&engine.WorkIntent{Intent: "read only", ForbiddenTools: []string{"mcp_fake_write"}})
	cs := f.mustConnect(t, plainToken)
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp_fake_write", Arguments: map[string]any{"path": "a.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(text(res), "intent gate refused the proposal") || !strings.Contains(text(res), "tool 'mcp_fake_write' is forbidden by the operator's intent") {
		t.Fatalf("a forbidden tool: %+v %q, want isError naming the intent", res, text(res))
	}
	if n := f.write.calls.Load(); n != 0 {
		t.Fatalf("the forbidden tool ran %d times", n)
	}
	if ev := f.rt.Events.Query(engine.EventQuery{Kinds: []engine.EventKind{engine.EventIntentViolation}}); len(ev) != 1 || ev[0].Data["tool"] != "mcp_fake_write" {
		t.Fatalf("intent_violation events: %+v", ev)
	}
	res, err = cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp_fake_read", Arguments: map[string]any{"path": "a.txt"}})
	if err != nil || res.IsError {
		t.Fatalf("a tool in intent: %+v %v", res, err)
	}
}
