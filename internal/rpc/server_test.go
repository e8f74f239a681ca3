package rpc

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/protocol"
)

func TestHealthz(t *testing.T) {
	ts := startServer(t, Options{Token: testToken})
	resp, err := http.Get("http" + strings.TrimPrefix(ts.url, "ws") + "healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read /healthz: %v", err)
	}
	if resp.StatusCode != 200 || string(body) != "ok\n" {
		t.Fatalf("healthz: %d %q", resp.StatusCode, body)
	}
}

func TestForeignOriginRefused(t *testing.T) {
	ts := startServer(t, Options{AllowedOrigins: []string{"ide.example.com"}})
	dial := func(origin string) (*http.Response, error) {
		h := http.Header{}
		h.Set("Origin", origin)
		ws, resp, err := websocket.Dial(ctxT(t), ts.url, &websocket.DialOptions{HTTPHeader: h})
		if err == nil {
			ws.CloseNow()
		}
		return resp, err
	}
	resp, err := dial("https://evil.example.net")
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("foreign origin: want 403, got %v %v", resp, err)
	}
	if _, err := dial("https://ide.example.com"); err != nil {
		t.Fatalf("configured origin refused: %v", err)
	}
	host := strings.TrimSuffix(strings.TrimPrefix(ts.url, "ws://"), "/")
	if _, err := dial("http://" + host); err != nil {
		t.Fatalf("same-host origin refused: %v", err)
	}
}

func TestMaxConnections(t *testing.T) {
	ts := startServer(t, Options{MaxConnections: 1})
	ts.dial(t, "")
	_, resp, err := websocket.Dial(ctxT(t), ts.url, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("second connection: want 503, got %v", err)
	}
}

func TestInFlightLimitRepliesWithoutBlockingTheReadLoop(t *testing.T) {
	blockers["inflight"] = make(chan struct{})
	blockers["inflight.started"] = make(chan struct{}, 1)
	ts := startServer(t, Options{MaxInFlight: 1})
	r := ts.raw(t)
	r.send(`{"jsonrpc":"2.0","id":1,"method":"test.block","params":{"name":"inflight"}}`)
	<-blockers["inflight.started"]
	wantErr(t, r.call(`{"jsonrpc":"2.0","id":2,"method":"state.keys"}`), protocol.CodeInternal, "too many requests in flight")
	close(blockers["inflight"])
	if rep := r.mustRecv(); string(rep.ID) != "1" || string(rep.Result) != `"released"` {
		t.Fatalf("blocked request: %+v", rep)
	}
	if rep := r.call(`{"jsonrpc":"2.0","id":3,"method":"state.keys"}`); rep.Error != nil {
		t.Fatalf("slot not released: %+v", rep.Error)
	}
}

func TestHandlerDeadline(t *testing.T) {
	blockers["deadline"] = make(chan struct{}) // never released
	ts := startServer(t, Options{HandlerTimeout: 50 * time.Millisecond})
	r := ts.raw(t)
	wantErr(t, r.call(`{"jsonrpc":"2.0","id":1,"method":"test.block","params":{"name":"deadline"}}`),
		protocol.CodeHandlerDeadline, "exceeded its 50ms response deadline")
}

func TestStateTenantIsolationAndSharing(t *testing.T) {
	ts := startServer(t, Options{Token: testToken})
	a := ts.dial(t, testToken)
	b := ts.dial(t, testToken)
	ctx := ctxT(t)
	mustCall := func(c *client.Client, method string, params, out any) {
		t.Helper()
		if err := c.Call(ctx, method, params, out); err != nil {
			t.Fatalf("%s: %v", method, err)
		}
	}
	mustCall(a, "state.set", map[string]any{"key": "k", "value": map[string]any{"n": 1}}, nil)
	mustCall(a, "state.set", map[string]any{"key": "k", "value": "acme", "tenant_id": "acme"}, nil)
	mustCall(a, "state.set", map[string]any{"key": "only-acme", "value": true, "tenant_id": "acme"}, nil)

	var got json.RawMessage
	mustCall(b, "state.get", map[string]any{"key": "k"}, &got) // shared across connections
	if string(got) != `{"n":1}` {
		t.Fatalf("unscoped k seen from b: %s", got)
	}
	mustCall(b, "state.get", map[string]any{"key": "k", "tenant_id": "acme"}, &got)
	if string(got) != `"acme"` {
		t.Fatalf("acme's k: %s", got)
	}
	mustCall(b, "state.get", map[string]any{"key": "k", "tenant_id": "globex"}, &got)
	if string(got) != `null` {
		t.Fatalf("globex sees acme's or unscoped k: %s", got)
	}
	var exists bool
	mustCall(b, "state.exists", map[string]any{"key": "only-acme"}, &exists)
	if exists {
		t.Fatal("unscoped caller sees a tenant key")
	}
	var keys []string
	mustCall(b, "state.keys", map[string]any{"tenant_id": "acme"}, &keys)
	if strings.Join(keys, ",") != "k,only-acme" {
		t.Fatalf("acme keys %v", keys)
	}
	mustCall(b, "state.keys", nil, &keys)
	if strings.Join(keys, ",") != "k" {
		t.Fatalf("unscoped keys %v", keys)
	}
	var snap map[string]any
	mustCall(b, "state.snapshot", map[string]any{"tenant_id": "globex"}, &snap)
	if len(snap) != 0 {
		t.Fatalf("globex snapshot %v", snap)
	}
	var ok string
	mustCall(b, "state.set", map[string]any{"key": "nullish"}, &ok)
	mustCall(b, "state.exists", map[string]any{"key": "nullish"}, &exists)
	if ok != "ok" || !exists {
		t.Fatalf("state.set without value: %q exists=%v", ok, exists)
	}
}

func TestToolsAreOwnedByTheirConnection(t *testing.T) {
	ts := startServer(t, Options{Token: testToken})
	a := ts.dial(t, testToken)
	b := ts.dial(t, testToken)
	ctx := ctxT(t)
	defs := []map[string]any{
		{"name": "zeta", "description": "last", "parameters": map[string]any{"type": "object"}},
		{"name": "alpha", "parameters": map[string]any{"type": "object", "required": []string{"path"}},
			"returns": map[string]any{"type": "string"}, "idempotent": true, "cache_ttl_secs": 60,
			"rate_limit": map[string]any{"max_calls": 5, "interval_secs": 1.5}},
	}
	var n int
	if err := a.Call(ctx, "tools.register", defs, &n); err != nil || n != 2 {
		t.Fatalf("register: %d %v", n, err)
	}
	var listed struct {
		Tools []json.RawMessage `json:"tools"`
		Count int               `json:"count"`
	}
	if err := a.Call(ctx, "tools.list", nil, &listed); err != nil {
		t.Fatal(err)
	}
	if listed.Count != 3 || !strings.Contains(string(listed.Tools[1]), `"name":"messaging.send"`) {
		t.Fatalf("the built-in messaging.send is missing: %d %s", listed.Count, listed.Tools)
	}
	list := mustJSON(map[string]any{"tools": []json.RawMessage{listed.Tools[0], listed.Tools[2]}, "count": 2})
	want := `{"count":2,"tools":[{"name":"alpha","description":"","parameters":{"required":["path"],"type":"object"},"returns":{"type":"string"},"idempotent":true,"cache_ttl_secs":60,"rate_limit":{"max_calls":5,"interval_secs":1.5}},{"name":"zeta","description":"last","parameters":{"type":"object"},"idempotent":false}]}`
	if string(list) != want {
		t.Fatalf("tools.list\n got %s\nwant %s", list, want)
	}
	var other protocol.ToolsListResult
	if err := b.Call(ctx, "tools.list", nil, &other); err != nil || other.Count != 1 {
		t.Fatalf("b sees a's tools: %+v %v", other, err)
	}
	var un protocol.ToolsUnregisterResult
	if err := b.Call(ctx, "tools.unregister", map[string]any{"name": "alpha"}, &un); err != nil || un.Removed != 0 {
		t.Fatalf("b removed a's tool: %+v %v", un, err)
	}
	if err := a.Call(ctx, "tools.unregister", map[string]any{"name": "alpha"}, &un); err != nil || un.Removed != 1 || un.Unregistered != "alpha" {
		t.Fatalf("unregister: %+v %v", un, err)
	}
}

func TestToolsRegisterRejectsBadInput(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t, "")
	ctx := ctxT(t)
	cases := []struct {
		name     string
		params   any
		contains string
	}{
		{"bad schema", []any{map[string]any{"name": "ok"}, map[string]any{"name": "bad", "parameters": map[string]any{"type": 12}}}, "tool 'bad': parameters is not a valid JSON Schema"},
		{"no name", []any{map[string]any{"description": "x"}}, "name is required"},
		{"object not array", map[string]any{"name": "x"}, "params must be an array of ToolDefinition"},
		{"bad rate limit", []any{map[string]any{"name": "r", "rate_limit": map[string]any{"max_calls": 0, "interval_secs": 1}}}, "rate_limit"},
		{"file reference", []any{map[string]any{"name": "f", "parameters": map[string]any{"$ref": "file:///etc/hostname"}}}, "tool 'f': parameters is not a valid JSON Schema"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, msg := rpcCode(t, c.Call(ctx, "tools.register", tc.params, nil))
			if code != protocol.CodeInvalidParams || !strings.Contains(msg, tc.contains) {
				t.Fatalf("got %d %q, want -32602 containing %q", code, msg, tc.contains)
			}
		})
	}
	var list protocol.ToolsListResult
	if err := c.Call(ctx, "tools.list", nil, &list); err != nil || list.Count != 1 {
		t.Fatalf("a failed register left tools behind: %+v", list)
	}
}

func TestSessionInitRegistersTools(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t, "")
	var res protocol.SessionInitResult
	if err := c.Call(ctxT(t), "session.init", map[string]any{"tools": []any{map[string]any{"name": "t1"}}}, &res); err != nil {
		t.Fatal(err)
	}
	if res.ToolsRegistered != 1 || res.SessionID == "" {
		t.Fatalf("session.init: %+v", res)
	}
}

func TestUnixSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "car-server.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ts := startServerWith(t, serverSetup{opts: Options{Token: testToken}, listener: l})
	c, err := client.Dial(ctxT(t), ts.url, &client.Options{Token: testToken, SocketPath: path})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var keys []string
	if err := c.Call(ctxT(t), "state.keys", nil, &keys); err != nil {
		t.Fatal(err)
	}
}

func TestShutdownLetsInFlightFinishThenClosesWith1001(t *testing.T) {
	blockers["shutdown"] = make(chan struct{})
	blockers["shutdown.started"] = make(chan struct{}, 1)
	ts := startServer(t, Options{})
	r := ts.raw(t)
	r.send(`{"jsonrpc":"2.0","id":1,"method":"test.block","params":{"name":"shutdown"}}`)
	select {
	case <-blockers["shutdown.started"]:
	case <-time.After(testTimeout):
		t.Fatal("the blocking request never started")
	}

	shut := make(chan error, 1)
	ctx := ctxT(t)
	go func() { shut <- ts.srv.Shutdown(ctx) }()
	// New connections are refused once draining has begun.
	ts.waitDraining(t)
	if _, resp, err := websocket.Dial(ctxT(t), ts.url, nil); err == nil || (resp != nil && resp.StatusCode != http.StatusServiceUnavailable) {
		t.Fatalf("a new connection was accepted during shutdown: %v %v", resp, err)
	}
	close(blockers["shutdown"])
	if rep := r.mustRecv(); string(rep.Result) != `"released"` {
		t.Fatalf("in-flight request did not finish: %+v", rep)
	}
	_, err := r.recv()
	if websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("want close 1001, got %v", err)
	}
	// The drain must finish within the grace: running out of it is a failure.
	select {
	case err := <-shut:
		if err != nil {
			t.Fatalf("shutdown did not drain within its grace: %v", err)
		}
	case <-time.After(2 * testTimeout): // past the grace: Shutdown ignored its context
		t.Fatal("shutdown never returned")
	}
}
