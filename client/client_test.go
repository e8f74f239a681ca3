package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sourcegraph/jsonrpc2"
	"go.uber.org/goleak"

	"github.com/parslee-ai/car-server/protocol"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestCall(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.dial(t, nil)
	var got map[string]int
	if err := c.Call(ctxT(t), "echo", map[string]int{"a": 1}, &got); err != nil {
		t.Fatalf("echo: %v", err)
	}
	if got["a"] != 1 || len(got) != 1 {
		t.Fatalf("echo = %v, want map[a:1]", got)
	}
}

func TestCallErrorKeepsCodeAndMessage(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.dial(t, nil)
	err := c.Call(ctxT(t), "fail", nil, nil)
	rerr := rpcError(t, err)
	if rerr.Code != protocol.CodeInvalidParams || rerr.Message != "param 'x' is required" {
		t.Fatalf("error = %d %q, want %d %q", rerr.Code, rerr.Message, protocol.CodeInvalidParams, "param 'x' is required")
	}
}

func TestDialErrors(t *testing.T) {
	d := startDaemon(t, nil)
	cases := []struct {
		name     string
		opts     *Options
		code     int64
		contains string
	}{
		{"wrong token", &Options{Token: "wrong"}, protocol.CodeAuthRequired, "session.auth: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Dial(ctxT(t), d.url, tc.opts)
			if err == nil {
				c.Close()
				t.Fatal("Dial succeeded")
			}
			if rerr := rpcError(t, err); rerr.Code != tc.code || !strings.Contains(err.Error(), tc.contains) {
				t.Fatalf("Dial error = %v (code %d), want code %d and %q", err, rerr.Code, tc.code, tc.contains)
			}
		})
	}

	t.Run("nothing listening", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		url := "ws://" + l.Addr().String() + "/"
		l.Close()
		c, err := Dial(ctxT(t), url, nil)
		if err == nil {
			c.Close()
			t.Fatal("Dial to a closed port succeeded")
		}
		if !strings.Contains(err.Error(), "connect to car-server at "+url) {
			t.Fatalf("Dial error = %v, want it to name the address", err)
		}
	})
}

// The daemon's requests reach the handler installed for their method; every
// outcome of the handler becomes the reply the daemon receives.
func TestServerRequests(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.dial(t, nil)
	sc := d.next(t)

	gotParams := make(chan string, 1)
	c.HandleRequest(protocol.MethodToolsExecute, func(_ context.Context, params json.RawMessage) (any, error) {
		gotParams <- string(params)
		return map[string]string{"output": "done"}, nil
	})
	c.HandleRequest("plain_error", func(context.Context, json.RawMessage) (any, error) {
		return nil, errors.New("disk full: free space and retry")
	})
	c.HandleRequest("rpc_error", func(context.Context, json.RawMessage) (any, error) {
		return nil, &jsonrpc2.Error{Code: -32042, Message: "tool refused"}
	})
	c.HandleRequest("wrapped_rpc_error", func(context.Context, json.RawMessage) (any, error) {
		return nil, fmt.Errorf("run: %w", &jsonrpc2.Error{Code: -32043, Message: "wrapped"})
	})
	c.HandleRequest("unencodable", func(context.Context, json.RawMessage) (any, error) {
		return make(chan int), nil
	})

	var res map[string]string
	if err := sc.rpc.Call(ctxT(t), protocol.MethodToolsExecute, map[string]string{"tool": "echo"}, &res); err != nil {
		t.Fatalf("tools.execute: %v", err)
	}
	if res["output"] != "done" {
		t.Fatalf("tools.execute result = %v", res)
	}
	if p := <-gotParams; p != `{"tool":"echo"}` {
		t.Fatalf("handler params = %s", p)
	}

	cases := []struct {
		method   string
		code     int64
		contains string
	}{
		{"plain_error", -32000, "disk full: free space and retry"},
		{"rpc_error", -32042, "tool refused"},
		{"wrapped_rpc_error", -32043, "wrapped"},
		{"unencodable", protocol.CodeInternal, "unsupported type"},
		{"no.such.method", protocol.CodeMethodNotFound, "this client has no handler for no.such.method"},
	}
	for _, tc := range cases {
		t.Run(tc.method, func(t *testing.T) {
			err := sc.rpc.Call(ctxT(t), tc.method, nil, nil)
			rerr := rpcError(t, err)
			if rerr.Code != tc.code || !strings.Contains(rerr.Message, tc.contains) {
				t.Fatalf("reply error = %d %q, want %d containing %q", rerr.Code, rerr.Message, tc.code, tc.contains)
			}
		})
	}
}

func TestNotifications(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.dial(t, nil)
	sc := d.next(t)
	cancels := make(chan string, 1)
	c.HandleNotification(protocol.MethodToolsCancel, func(params json.RawMessage) {
		cancels <- string(params)
	})
	// A notification nobody handles is dropped without disturbing the next.
	if err := sc.rpc.Notify(ctxT(t), "nobody.listens", nil); err != nil {
		t.Fatal(err)
	}
	if err := sc.rpc.Notify(ctxT(t), protocol.MethodToolsCancel, protocol.ToolCancelParams{RequestID: "r1", Reason: "timeout"}); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-cancels:
		var got protocol.ToolCancelParams
		if err := json.Unmarshal([]byte(p), &got); err != nil || got.RequestID != "r1" || got.Reason != "timeout" {
			t.Fatalf("tools.cancel params = %s (%v), want request r1 for timeout", p, err)
		}
	case <-ctxT(t).Done():
		t.Fatal("tools.cancel never reached its handler")
	}

	// And the client's own notifications reach the daemon.
	if err := c.Notify(ctxT(t), "client.note", map[string]int{"n": 1}); err != nil {
		t.Fatal(err)
	}
	select {
	case req := <-d.notified:
		if req.Method != "client.note" || string(*req.Params) != `{"n":1}` {
			t.Fatalf("daemon got %s %s", req.Method, *req.Params)
		}
	case <-ctxT(t).Done():
		t.Fatal("the daemon never got the client's notification")
	}
}

// A connection that drops while a call waits fails the call at once with
// ErrClosed instead of leaving it to its context.
func TestConnectionDropFailsPendingCall(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.dial(t, nil)
	sc := d.next(t)
	callErr := make(chan error, 1)
	go func() { callErr <- c.Call(context.Background(), "hang", nil, nil) }()
	select {
	case <-d.hanging:
	case <-ctxT(t).Done():
		t.Fatal("hang never started")
	}
	sc.ws.CloseNow() // no close handshake: the TCP connection just ends

	select {
	case err := <-callErr:
		if !errors.Is(err, jsonrpc2.ErrClosed) {
			t.Fatalf("pending call = %v, want jsonrpc2.ErrClosed", err)
		}
	case <-ctxT(t).Done():
		t.Fatal("pending call still waiting after the connection dropped")
	}
	select {
	case <-c.Done():
	case <-ctxT(t).Done():
		t.Fatal("Done not closed after the connection dropped")
	}
	if err := c.Call(ctxT(t), "echo", nil, nil); !errors.Is(err, jsonrpc2.ErrClosed) {
		t.Fatalf("call after the drop = %v, want jsonrpc2.ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close after the drop = %v, want nil", err)
	}
}

// The client has no automatic reconnect: when the daemon restarts, the old
// client reports closed and a fresh Dial to the same socket works.
func TestRedialAfterDaemonRestart(t *testing.T) {
	sock := shortSocketPath(t)
	d1 := startDaemon(t, listenUnix(t, sock))
	old := d1.dial(t, &Options{Token: testToken, SocketPath: sock})
	if err := old.Call(ctxT(t), "echo", 1, nil); err != nil {
		t.Fatalf("echo over the Unix socket: %v", err)
	}

	d1.stop()
	select {
	case <-old.Done():
	case <-ctxT(t).Done():
		t.Fatal("old client not closed after the daemon stopped")
	}
	if err := old.Call(ctxT(t), "echo", 1, nil); !errors.Is(err, jsonrpc2.ErrClosed) {
		t.Fatalf("old client call = %v, want jsonrpc2.ErrClosed", err)
	}

	d2 := startDaemon(t, listenUnix(t, sock))
	fresh := d2.dial(t, &Options{Token: testToken, SocketPath: sock})
	var n int
	if err := fresh.Call(ctxT(t), "echo", 7, &n); err != nil || n != 7 {
		t.Fatalf("echo after redial = %d, %v; want 7", n, err)
	}
}

// Close cancels the context of running request handlers and returns only
// after they have finished.
func TestCloseWaitsForHandlers(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.dial(t, nil)
	sc := d.next(t)
	started := make(chan struct{})
	finished := false
	c.HandleRequest("slow", func(ctx context.Context, _ json.RawMessage) (any, error) {
		close(started)
		<-ctx.Done()
		finished = true // read after Close returns; the race detector checks the ordering
		return nil, ctx.Err()
	})
	call, err := sc.rpc.DispatchCall(ctxT(t), "slow", nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-ctxT(t).Done():
		t.Fatal("handler never started")
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !finished {
		t.Fatal("Close returned while a request handler was still running")
	}
	// The daemon's call ends with the connection; it has no reply to wait for.
	if err := call.Wait(ctxT(t), nil); err == nil {
		t.Fatal("the daemon's call succeeded after the client closed")
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close = %v, want nil", err)
	}
}

func listenUnix(t *testing.T, path string) net.Listener {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// shortSocketPath is a socket path within the ~104-byte limit of sun_path,
// which a test's TempDir can exceed.
func shortSocketPath(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "car")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "d.sock")
}

// Params already encoded are checked before they go out: a caller's broken
// JSON is an error at once, not a request the daemon cannot answer.
func TestCallRefusesInvalidRawParams(t *testing.T) {
	err := withJSON(json.RawMessage(`{"a":`), func(json.RawMessage) error {
		t.Fatal("invalid params were sent")
		return nil
	})
	var me *json.MarshalerError
	if !errors.As(err, &me) {
		t.Fatalf("err = %v, want json.Marshal's error", err)
	}
	sent := false
	if err := withJSON(json.RawMessage(` {"a": 1} `), func(raw json.RawMessage) error { sent = string(raw) == ` {"a": 1} `; return nil }); err != nil || !sent {
		t.Fatalf("valid params: sent %v, err %v", sent, err)
	}
}

// A nil json.RawMessage is null, as json.Marshal writes it: as a call's
// params, a notification's, and a handler's result.
func TestNilRawMessageIsNull(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.dial(t, nil)
	sc := d.next(t)
	var got json.RawMessage
	if err := c.Call(ctxT(t), "echo", json.RawMessage(nil), &got); err != nil || string(got) != "null" {
		t.Fatalf("echo of a nil RawMessage: %s, %v", got, err)
	}
	c.HandleRequest("nil_result", func(context.Context, json.RawMessage) (any, error) {
		return json.RawMessage(nil), nil
	})
	var res json.RawMessage
	if err := sc.rpc.Call(ctxT(t), "nil_result", nil, &res); err != nil || string(res) != "null" {
		t.Fatalf("a handler's nil RawMessage: %s, %v", res, err)
	}
	sent := ""
	if err := withJSON(json.RawMessage(nil), func(raw json.RawMessage) error { sent = string(raw); return nil }); err != nil || sent != "null" {
		t.Fatalf("a notification's nil RawMessage: sent %q, err %v", sent, err)
	}
}
