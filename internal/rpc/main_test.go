package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/sourcegraph/jsonrpc2"
	"go.uber.org/goleak"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/engine"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testTimeout bounds every wait in these tests; it is a hang guard, not a
// performance assertion.
const testTimeout = 10 * time.Second

// blockRelease lets tests hold a request in flight: test.block waits until
// the channel it names is closed or its context ends.
var blockers = map[string]chan struct{}{}

func init() {
	methods["test.block"] = method{handle: func(c *conn, ctx context.Context, params *json.RawMessage) (any, error) {
		var p struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(*params, &p)
		started := blockers[p.Name+".started"]
		if started != nil {
			started <- struct{}{}
		}
		select {
		case <-blockers[p.Name]:
			return "released", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
}

// testServer is a real server on a real loopback listener.
type testServer struct {
	srv *Server
	url string
	rt  *engine.Runtime
}

func startServer(t *testing.T, opts Options) *testServer {
	return startServerTB(t, opts, 0)
}

// startServerTB starts a server for a test or benchmark; concurrency bounds
// the actions of one proposal (0: the default).
func startServerTB(t testing.TB, opts Options, concurrency int) *testServer {
	t.Helper()
	rt := engine.NewRuntime(engine.Options{RetryBase: time.Millisecond, MaxConcurrency: concurrency})
	srv := NewServer(rt, opts)
	l := listenLoopback(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(l); err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	})
	return &testServer{srv: srv, url: "ws://" + l.Addr().String() + "/", rt: rt}
}

func listenLoopback(t testing.TB) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// dial connects a Go client, authenticated and negotiated with token.
func (ts *testServer) dial(t *testing.T, token string) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c, err := client.Dial(ctx, ts.url, &client.Options{Token: token})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rawConn is a bare WebSocket for tests that send frames by hand.
type rawConn struct {
	t  *testing.T
	ws *websocket.Conn
}

func (ts *testServer) raw(t *testing.T) *rawConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, ts.url, nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	ws.SetReadLimit(64 << 20)
	t.Cleanup(func() { ws.CloseNow() })
	return &rawConn{t: t, ws: ws}
}

func (r *rawConn) send(frame string) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := r.ws.Write(ctx, websocket.MessageText, []byte(frame)); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

// reply is a decoded response frame.
type reply struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (r *rawConn) recv() (reply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	_, data, err := r.ws.Read(ctx)
	if err != nil {
		return reply{}, err
	}
	var rep reply
	if err := json.Unmarshal(data, &rep); err != nil {
		r.t.Fatalf("reply is not JSON: %s", data)
	}
	return rep, nil
}

func (r *rawConn) mustRecv() reply {
	r.t.Helper()
	rep, err := r.recv()
	if err != nil {
		r.t.Fatalf("read: %v", err)
	}
	return rep
}

// call sends a request frame and returns its reply.
func (r *rawConn) call(frame string) reply {
	r.t.Helper()
	r.send(frame)
	return r.mustRecv()
}

// rpcCode returns the JSON-RPC error code of err, failing when it is not one.
func rpcCode(t *testing.T, err error) (int64, string) {
	t.Helper()
	var rerr *jsonrpc2.Error
	if !errors.As(err, &rerr) {
		t.Fatalf("want a JSON-RPC error, got %v", err)
	}
	return rerr.Code, rerr.Message
}

func wantErr(t *testing.T, rep reply, code int, contains string) {
	t.Helper()
	if rep.Error == nil {
		t.Fatalf("want error %d, got result %s", code, rep.Result)
	}
	if rep.Error.Code != code || !strings.Contains(rep.Error.Message, contains) {
		t.Fatalf("want error %d containing %q, got %d %q", code, contains, rep.Error.Code, rep.Error.Message)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}
