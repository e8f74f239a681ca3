// Package client is a small Go client for car-server: it dials the daemon
// over WebSocket (TCP or the Unix socket), authenticates, negotiates the
// protocol version, makes calls, and serves the daemon's requests back to the
// client (tools.execute) and its notifications (tools.cancel). Stream runs a
// streaming tool as a function writing chunks.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/coder/websocket"
	"github.com/sourcegraph/jsonrpc2"

	"github.com/parslee-ai/car-server/internal/bufpool"
	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/internal/wsstream"
	"github.com/parslee-ai/car-server/protocol"
)

// RequestHandler serves one server → client request. Its result is sent as
// the reply; an error is sent as a JSON-RPC error (a *jsonrpc2.Error keeps its
// code, anything else becomes code -32000).
type RequestHandler func(ctx context.Context, params json.RawMessage) (any, error)

// NotificationHandler receives one server → client notification. It runs on
// the read loop, so it must return quickly.
type NotificationHandler func(params json.RawMessage)

// Options configure Dial.
type Options struct {
	// Token is sent with session.auth right after connecting; empty skips auth.
	Token string
	// HostToken, when set, authenticates with the host role instead of Token.
	HostToken string
	// AgentID, when set, binds the connection to this agent; Token is then
	// the agent's own token (car-server agents issue-token).
	AgentID string
	// SkipHandshake leaves server.handshake to the caller.
	SkipHandshake bool
	// SocketPath dials this Unix socket instead of TCP; the URL's host is then
	// only used for the Host header.
	SocketPath string
	// Header is added to the upgrade request (for example Origin).
	Header http.Header
	// ReadLimit is the largest frame accepted from the daemon (64 MiB when 0).
	ReadLimit int64
}

// Client is one connection to the daemon.
type Client struct {
	ws   *websocket.Conn
	rpc  *jsonrpc2.Conn
	ctx  context.Context // ends with Close
	stop context.CancelFunc

	mu       sync.RWMutex
	requests map[string]RequestHandler
	notes    map[string]NotificationHandler
	streams  map[string]context.CancelCauseFunc // handle → its running Stream
	closed   bool                               // guarded by mu; no handler starts after Close
	inflight sync.WaitGroup

	callSeq atomic.Uint64          // the ids of this client's calls
	calls   wsstream.Calls[uint64] // calls in flight
}

// Dial connects to url (ws://host:port/), then authenticates and negotiates
// the protocol as opts say.
func Dial(ctx context.Context, url string, opts *Options) (*Client, error) {
	if opts == nil {
		opts = &Options{}
	}
	dopts := &websocket.DialOptions{HTTPHeader: opts.Header}
	if opts.SocketPath != "" {
		path := opts.SocketPath
		dopts.HTTPClient = &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", path)
			},
		}}
	}
	ws, resp, err := websocket.Dial(ctx, url, dopts)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("connect to car-server at %s: %w (HTTP %d)", url, err, resp.StatusCode)
		}
		return nil, fmt.Errorf("connect to car-server at %s: %w", url, err)
	}
	limit := opts.ReadLimit
	if limit <= 0 {
		limit = 64 << 20
	}
	ws.SetReadLimit(limit)
	c := New(ws)
	var auth protocol.AuthParams
	switch {
	case opts.HostToken != "":
		auth = protocol.AuthParams{HostToken: opts.HostToken}
	case opts.AgentID != "":
		auth = protocol.AuthParams{Token: opts.Token, AgentID: opts.AgentID}
	default:
		auth = protocol.AuthParams{Token: opts.Token}
	}
	if auth != (protocol.AuthParams{}) {
		if err := c.authWith(ctx, auth); err != nil {
			c.Close()
			return nil, err
		}
	}
	if !opts.SkipHandshake {
		if _, err := c.Handshake(ctx); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// New wraps an established WebSocket connection.
func New(ws *websocket.Conn) *Client {
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{
		ws:       ws,
		ctx:      ctx,
		stop:     cancel,
		streams:  make(map[string]context.CancelCauseFunc),
		requests: make(map[string]RequestHandler),
		notes:    make(map[string]NotificationHandler),
	}
	c.rpc = jsonrpc2.NewConn(ctx, wsstream.New(ctx, ws, 0, nil), handler{c},
		jsonrpc2.SetLogger(discard{}), jsonrpc2.OnSend(c.sending), jsonrpc2.OnRecv(c.received))
	return c
}

// HandleRequest installs the handler of a server → client request method,
// such as tools.execute.
func (c *Client) HandleRequest(method string, h RequestHandler) {
	c.mu.Lock()
	c.requests[method] = h
	c.mu.Unlock()
}

// HandleNotification installs the handler of a server → client
// notification, such as tools.cancel.
func (c *Client) HandleNotification(method string, h NotificationHandler) {
	c.mu.Lock()
	c.notes[method] = h
	c.mu.Unlock()
}

// Auth sends session.auth.
func (c *Client) Auth(ctx context.Context, token string) error {
	return c.authWith(ctx, protocol.AuthParams{Token: token})
}

// AuthHost sends session.auth with the host token: the connection gets the
// host role.
func (c *Client) AuthHost(ctx context.Context, hostToken string) error {
	return c.authWith(ctx, protocol.AuthParams{HostToken: hostToken})
}

func (c *Client) authWith(ctx context.Context, p protocol.AuthParams) error {
	var res protocol.AuthResult
	if err := c.Call(ctx, protocol.MethodSessionAuth, p, &res); err != nil {
		return fmt.Errorf("session.auth: %w", err)
	}
	return nil
}

// Handshake negotiates the protocol version this package speaks.
func (c *Client) Handshake(ctx context.Context) (*protocol.HandshakeResult, error) {
	var res protocol.HandshakeResult
	params := map[string]any{"protocol_version": protocol.ProtocolVersion, "client_version": "car-server-go-client"}
	if err := c.Call(ctx, protocol.MethodServerHandshake, params, &res); err != nil {
		return nil, fmt.Errorf("server.handshake: %w", err)
	}
	return &res, nil
}

// Call sends a request and decodes its result into result (which may be
// nil). A JSON-RPC error reply is returned as *jsonrpc2.Error.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	// The call carries its params to the send hook and its result back from
	// the receive hook (wsstream.Call), under an id of the client's own.
	id := c.callSeq.Add(1) // from 1: the library takes an id of 0 for unset
	call := &wsstream.Call{}
	c.calls.Put(id, call)
	defer c.calls.Drop(id)
	var w jsonrpc2.Waiter
	dispatch := func(raw json.RawMessage) (err error) {
		call.Params = raw
		w, err = c.rpc.DispatchCall(ctx, method, nil, jsonrpc2.PickID(jsonrpc2.ID{Num: id}))
		call.Params = nil // written
		return err
	}
	var err error
	if params == nil {
		err = dispatch(nil)
	} else {
		err = withJSON(params, dispatch)
	}
	if err != nil {
		return err
	}
	if err := w.Wait(ctx, nil); err != nil || result == nil {
		return err
	}
	raw := call.Result
	if raw == nil {
		raw = json.RawMessage("null")
	}
	if pr, ok := result.(*protocol.ProposalResult); ok && pr != nil {
		return protocol.DecodeProposalResult(raw, pr)
	}
	return json.Unmarshal(raw, result)
}

// sending puts a call's params on its request as the library sends it.
func (c *Client) sending(req *jsonrpc2.Request, _ *jsonrpc2.Response) {
	if req == nil || req.Notif || req.Params != nil || req.ID.IsString {
		return
	}
	if call := c.calls.Get(req.ID.Num); call != nil && call.Params != nil {
		req.Params = &call.Params
	}
}

// received takes a call's result off its reply before Wait sees it.
func (c *Client) received(req *jsonrpc2.Request, resp *jsonrpc2.Response) {
	if req == nil || resp == nil || resp.ID.IsString || resp.Error != nil || resp.Result == nil {
		return
	}
	if call := c.calls.Get(resp.ID.Num); call != nil {
		call.Result = *resp.Result
	}
}

// Notify sends a notification.
func (c *Client) Notify(ctx context.Context, method string, params any) error {
	if params == nil {
		return c.rpc.Notify(ctx, method, nil)
	}
	return withJSON(params, func(raw json.RawMessage) error { return c.rpc.Notify(ctx, method, raw) })
}

// buffers hold encoded params and results while they are sent.
var buffers = bufpool.New(1024, 64<<10)

// withJSON calls use with v as JSON, encoded into a pooled buffer that use
// must not keep (the library copies params; the stream has written a
// response before SendResponse returns). jsonvalue.Append writes what
// json.Marshal would, without reflecting over maps and slices of any.
func withJSON(v any, use func(json.RawMessage) error) error {
	if raw, ok := v.(json.RawMessage); ok {
		if raw == nil {
			raw = json.RawMessage("null") // as json.Marshal writes a nil RawMessage
		}
		if !jsonvalue.Valid(raw) {
			_, err := json.Marshal(raw) // its error, as the library would report it
			return err
		}
		return use(raw)
	}
	bp := buffers.Get()
	defer buffers.Put(bp)
	b, err := jsonvalue.Append(*bp, v)
	*bp = b
	if err != nil {
		return err
	}
	return use(b)
}

// Done is closed when the connection ends.
func (c *Client) Done() <-chan struct{} { return c.rpc.DisconnectNotify() }

// Close closes the connection and waits for running request handlers.
func (c *Client) Close() error {
	err := c.rpc.Close()
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.stop()
	c.inflight.Wait()
	if errors.Is(err, jsonrpc2.ErrClosed) {
		return nil
	}
	return err
}

// handler serves server → client messages: notifications inline, requests
// on their own goroutine so a slow tool never blocks the read loop.
type handler struct{ c *Client }

func (h handler) Handle(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) {
	c := h.c
	var params json.RawMessage
	if req.Params != nil {
		params = *req.Params
	}
	if req.Notif {
		if req.Method == protocol.MethodToolsCancel {
			c.cancelStream(params)
		}
		c.mu.RLock()
		nh := c.notes[req.Method]
		c.mu.RUnlock()
		if nh != nil {
			nh(params)
		}
		return
	}
	c.mu.Lock()
	rh := c.requests[req.Method]
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.inflight.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.inflight.Done()
		resp := &jsonrpc2.Response{ID: req.ID}
		if rh == nil {
			resp.Error = &jsonrpc2.Error{Code: protocol.CodeMethodNotFound, Message: "unknown tool: this client has no handler for " + req.Method}
		} else if res, err := rh(ctx, params); err != nil {
			var rerr *jsonrpc2.Error
			if !errors.As(err, &rerr) {
				rerr = &jsonrpc2.Error{Code: -32000, Message: err.Error()}
			}
			resp.Error = rerr
		} else {
			err := withJSON(res, func(raw json.RawMessage) error {
				resp.Result = &raw
				return conn.SendResponse(ctx, resp)
			})
			if resp.Result != nil {
				return // sent, or the connection is gone
			}
			resp.Error = &jsonrpc2.Error{Code: protocol.CodeInternal, Message: err.Error()}
		}
		_ = conn.SendResponse(ctx, resp)
	}()
}

type discard struct{}

func (discard) Printf(string, ...any) {}
