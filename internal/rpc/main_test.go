package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/sourcegraph/jsonrpc2"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/store/file"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testTimeout bounds every wait in these tests; it is a hang guard, not a
// performance assertion.
const testTimeout = 30 * time.Second

// blockRelease lets tests hold a request in flight: test.block waits until
// the channel it names is closed or its context ends.
var blockers = map[string]chan struct{}{}

func init() {
	methodAccess["test.block"] = accessAny
	methods["test.block"] = method{handle: func(c *conn, ctx context.Context, params *json.RawMessage) (any, error) {
		var p struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(*params, &p); err != nil {
			return nil, invalidParams("test.block: %v", err)
		}
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
	srv  *Server
	url  string
	rt   *engine.Runtime
	logs *logWatch
	// draining is closed when Shutdown closes the listener: the server sets
	// its draining flag before that, so new work is refused from then on.
	draining <-chan struct{}
	// stop shuts the server down within testTimeout, waits for Serve and
	// runs closeAfter; it runs once, and again at cleanup does nothing.
	stop func() error
}

// serverSetup says how startServerWith builds a server; the zero value is
// the default server on a loopback TCP listener.
type serverSetup struct {
	opts     Options
	engine   engine.Options
	listener net.Listener // nil: a loopback TCP listener
	// closeAfter runs once the server has shut down (ledgers, journals).
	closeAfter func() error
}

func startServer(t *testing.T, opts Options) *testServer {
	t.Helper()
	return startServerWith(t, serverSetup{opts: opts})
}

// startRuntime serves a runtime built from opts; closeAfter runs after the
// server has shut down.
func startRuntime(t *testing.T, opts engine.Options, closeAfter func() error) *testServer {
	t.Helper()
	return startServerWith(t, serverSetup{engine: opts, closeAfter: closeAfter})
}

// startServerWith is the one way these tests start a server, its runtime
// over an in-memory state of the file store unless s.engine names one. It
// registers a bounded shutdown: a shutdown that does not finish within
// testTimeout fails the test.
func startServerWith(t testing.TB, s serverSetup) *testServer {
	t.Helper()
	if s.engine.RetryBase == 0 {
		s.engine.RetryBase = time.Millisecond
	}
	if s.engine.State == nil {
		s.engine.State = file.NewState()
	}
	logs := newLogWatch()
	if s.opts.Logger == nil {
		s.opts.Logger = zap.New(logs.core())
	}
	l := s.listener
	if l == nil {
		l = listenLoopback(t)
	}
	nl := &notifyListener{Listener: l, closed: make(chan struct{})}
	rt := engine.NewRuntime(s.engine)
	srv := NewServer(rt, s.opts)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(nl) }()
	url := "ws://" + l.Addr().String() + "/"
	if l.Addr().Network() == "unix" {
		url = "ws://car-server/"
	}
	ts := &testServer{srv: srv, url: url, rt: rt, logs: logs, draining: nl.closed}
	ts.stop = sync.OnceValue(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		var errs []error
		if err := srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("shutdown did not finish within %s: %w", testTimeout, err))
		}
		select {
		case err := <-served:
			if err != nil {
				errs = append(errs, fmt.Errorf("serve: %w", err))
			}
		case <-time.After(testTimeout):
			errs = append(errs, fmt.Errorf("Serve did not return within %s of shutdown", testTimeout))
		}
		if len(errs) == 0 {
			rt.Close() // the runtime's workers; with the server stuck, they may be too
		}
		if s.closeAfter != nil {
			if err := s.closeAfter(); err != nil {
				errs = append(errs, fmt.Errorf("close after shutdown: %w", err))
			}
		}
		return errors.Join(errs...)
	})
	t.Cleanup(func() {
		if err := ts.stop(); err != nil {
			t.Error(err)
		}
	})
	return ts
}

// notifyListener closes closed when the server closes it.
type notifyListener struct {
	net.Listener
	once   sync.Once
	closed chan struct{}
}

func (l *notifyListener) Close() error {
	err := l.Listener.Close()
	l.once.Do(func() { close(l.closed) })
	return err
}

// waitDraining waits until Shutdown has begun refusing new work.
func (ts *testServer) waitDraining(t *testing.T) {
	t.Helper()
	select {
	case <-ts.draining:
	case <-time.After(testTimeout):
		t.Fatal("the server never started draining")
	}
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
	r := &rawConn{t: t, ws: ws}
	if ts.srv.opts.Token == "" {
		// Authenticated from the start: agree on the version too, as every
		// client does, so that a test's frames reach the methods.
		r.handshake()
	}
	return r
}

// handshake sends server.handshake and fails the test unless it succeeds.
func (r *rawConn) handshake() {
	r.t.Helper()
	if rep := r.call(`{"jsonrpc":"2.0","id":"handshake","method":"server.handshake","params":{"protocol_version":2}}`); rep.Error != nil {
		r.t.Fatalf("server.handshake: %+v", rep.Error)
	}
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

// ctxT is a context that ends with the test, bounded by testTimeout.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// holdNotifications holds, through notifyHook, every notification that
// match selects, as a socket that has stopped draining would: the first one
// held signals on held (buffered, capacity 1), and all of them go on once
// release is closed. The hook is removed after the server has stopped.
func holdNotifications(t *testing.T, held chan struct{}, release <-chan struct{}, match func(c *conn, method string) bool) {
	notifyHook = func(ctx context.Context, c *conn, method string) {
		if !match(c, method) {
			return
		}
		select {
		case held <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
	}
	t.Cleanup(func() { notifyHook = nil })
}

// stateValue reads key of tenant's namespace straight from the runtime's
// state.
func (ts *testServer) stateValue(t testing.TB, tenant, key string) (any, bool) {
	t.Helper()
	v, ok, err := ts.rt.State.Get(context.Background(), tenant, key)
	if err != nil {
		t.Fatal(err)
	}
	return v, ok
}
