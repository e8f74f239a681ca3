package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/sourcegraph/jsonrpc2"

	"github.com/parslee-ai/car-server/internal/wsstream"
	"github.com/parslee-ai/car-server/protocol"
)

// testTimeout bounds every wait in these tests; it is a hang guard, not a
// performance assertion.
const testTimeout = 10 * time.Second

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

const testToken = "secret"

// fakeDaemon is a minimal JSON-RPC 2.0 server over a real WebSocket, enough
// to drive the client: session.auth, server.handshake, echo, fail and hang.
type fakeDaemon struct {
	srv      *httptest.Server
	url      string
	accepted chan *serverConn // each connection, for server → client traffic
	notified chan *jsonrpc2.Request
	hanging  chan struct{} // a hang request has started
	quit     chan struct{}
	wg       sync.WaitGroup // connection handlers
	stopOnce sync.Once
}

// serverConn is the daemon's end of one connection.
type serverConn struct {
	rpc *jsonrpc2.Conn
	ws  *websocket.Conn
}

// startDaemon serves on l (TCP loopback when nil) until the test ends or
// stop is called.
func startDaemon(t *testing.T, l net.Listener) *fakeDaemon {
	t.Helper()
	d := &fakeDaemon{
		accepted: make(chan *serverConn, 8),
		notified: make(chan *jsonrpc2.Request, 8),
		hanging:  make(chan struct{}, 8),
		quit:     make(chan struct{}),
	}
	d.srv = httptest.NewUnstartedServer(http.HandlerFunc(d.serveWS))
	if l != nil {
		d.srv.Listener.Close()
		d.srv.Listener = l
	}
	d.srv.Start()
	d.url = "ws" + strings.TrimPrefix(d.srv.URL, "http") + "/"
	if l != nil && l.Addr().Network() == "unix" {
		d.url = "ws://car-server/"
	}
	t.Cleanup(d.stop)
	return d
}

// stop closes the listener and every connection, then waits for their
// handlers.
func (d *fakeDaemon) stop() {
	d.stopOnce.Do(func() {
		d.srv.Close()
		close(d.quit)
		d.wg.Wait()
	})
}

func (d *fakeDaemon) serveWS(w http.ResponseWriter, r *http.Request) {
	d.wg.Add(1)
	defer d.wg.Done()
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	conn := jsonrpc2.NewConn(context.Background(), wsstream.New(context.Background(), ws, 0, nil),
		jsonrpc2.HandlerWithError(d.handle).SuppressErrClosed(), jsonrpc2.SetLogger(log.New(io.Discard, "", 0)))
	select {
	case d.accepted <- &serverConn{rpc: conn, ws: ws}:
	default:
	}
	select {
	case <-conn.DisconnectNotify():
	case <-d.quit:
		conn.Close()
	}
}

// handle serves one client request on the connection's read loop.
func (d *fakeDaemon) handle(ctx context.Context, _ *jsonrpc2.Conn, req *jsonrpc2.Request) (any, error) {
	if req.Notif {
		d.notified <- req
		return nil, nil
	}
	var params json.RawMessage
	if req.Params != nil {
		params = *req.Params
	}
	switch req.Method {
	case protocol.MethodSessionAuth:
		var p protocol.AuthParams
		if err := json.Unmarshal(params, &p); err != nil || p.Token != testToken {
			return nil, &jsonrpc2.Error{Code: protocol.CodeAuthRequired, Message: "invalid token"}
		}
		return protocol.AuthResult{OK: true, AuthEnabled: true}, nil
	case protocol.MethodServerHandshake:
		var p protocol.HandshakeParams
		if err := json.Unmarshal(params, &p); err != nil || string(p.ProtocolVersion) != "2" {
			return nil, &jsonrpc2.Error{Code: protocol.CodeVersionMismatch, Message: "protocol_version must be 2"}
		}
		return protocol.HandshakeResult{ProtocolVersion: protocol.ProtocolVersion, ServerVersion: "test",
			ClientProtocolVersion: protocol.ProtocolVersion}, nil
	case "echo":
		return params, nil
	case "fail":
		return nil, &jsonrpc2.Error{Code: protocol.CodeInvalidParams, Message: "param 'x' is required"}
	case "hang":
		d.hanging <- struct{}{}
		<-ctx.Done() // ends when the connection closes
		return nil, ctx.Err()
	}
	return nil, &jsonrpc2.Error{Code: protocol.CodeMethodNotFound, Message: "method not found: " + req.Method}
}

// next returns the daemon's end of the next accepted connection.
func (d *fakeDaemon) next(t *testing.T) *serverConn {
	t.Helper()
	select {
	case sc := <-d.accepted:
		return sc
	case <-ctxT(t).Done():
		t.Fatal("the daemon accepted no connection")
		return nil
	}
}

// dial connects a client with auth and handshake; the test closes it.
func (d *fakeDaemon) dial(t *testing.T, opts *Options) *Client {
	t.Helper()
	if opts == nil {
		opts = &Options{Token: testToken}
	}
	c, err := Dial(ctxT(t), d.url, opts)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rpcError returns err as a JSON-RPC error, failing when it is not one.
func rpcError(t *testing.T, err error) *jsonrpc2.Error {
	t.Helper()
	var rerr *jsonrpc2.Error
	if !errors.As(err, &rerr) {
		t.Fatalf("want a JSON-RPC error, got %v", err)
	}
	return rerr
}
