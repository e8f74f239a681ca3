package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/sourcegraph/jsonrpc2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/fanout"
	"github.com/parslee-ai/car-server/internal/host"
	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/internal/metrics"
	"github.com/parslee-ai/car-server/internal/streams"
	"github.com/parslee-ai/car-server/internal/tracing"
	"github.com/parslee-ai/car-server/internal/wsstream"
	"github.com/parslee-ai/car-server/protocol"
)

// conn is one WebSocket connection and the session it carries.
//
// An idle connection holds one goroutine of its own, the JSON-RPC library's
// read loop, plus the library's close watcher: nothing waits for it to end.
// When it ends, the library closes its stream, and that starts finish.
type conn struct {
	srv *Server
	id  string
	log connLog
	ws  *websocket.Conn
	// socket is the connection under ws, which holds buffers only while
	// bytes move.
	socket *pooledConn
	rpc    *jsonrpc2.Conn   // set once; ready is closed after
	stream *wsstream.Stream // under rpc; set with it
	ready  chan struct{}
	sess   *engine.Session
	// remote is the peer's address, set before ready is closed.
	remote string

	authWaited chan struct{} // closed when awaitAuth has returned (at once when auth is off)

	// hctx is the parent of the contexts of the requests that serve the
	// client while it is there (method.followsClient: proposals and
	// multi-agent runs, whose tools and agents are its callbacks). It is
	// cancelled, with the reason as its cause, when the client disconnects
	// or when shutdown runs out of grace; callbacks pass that reason on in
	// tools.cancel.
	hctx    context.Context
	hcancel context.CancelCauseFunc
	// dctx, hctx's parent, is the parent of every other request's context:
	// a request the daemon has read is served, its durable effect made,
	// even when the connection closes right after it was sent. Only
	// shutdown out of grace cancels it (and hctx with it).
	dctx    context.Context
	dcancel context.CancelCauseFunc

	authed     atomic.Bool
	authDone   chan struct{} // closed once session.auth succeeds
	authOnce   sync.Once
	evict      chan struct{} // closed when the server evicts it unauthenticated
	evicted    bool          // guarded by srv.mu: evicted or timed out before auth
	opened     time.Time     // when the upgrade completed
	spoke      atomic.Bool   // its first bytes arrived: it is authenticating, never the eviction's victim
	host       atomic.Bool   // authenticated with the host token
	negotiated atomic.Bool
	clientName atomic.Pointer[string] // what server.handshake called the client
	// memoryNamespace is what session.auth named; recorded, no effect.
	memoryNamespace atomic.Pointer[string]
	callbackSeq     atomic.Uint64
	calls           wsstream.Calls[string] // tools.execute calls in flight (callback.go)

	// abandoned holds the ids of callbacks the daemon gave up on whose late
	// reply has not come: the JSON-RPC library keeps each until it does, so
	// their number is bounded (Options.MaxAbandoned).
	abandonedMu sync.Mutex
	abandoned   map[string]struct{}
	sem         chan struct{} // in-flight request slots

	mu       sync.Mutex // guards closed, draining, sealed, intents, events, eventSub and the Adds of handlers and exempt
	closed   bool
	draining bool
	sealed   bool           // the drain no longer serves the drain-exempt methods
	handlers sync.WaitGroup // requests taken before draining, and owned goroutines
	exempt   sync.WaitGroup // drain-exempt requests taken while draining, whose replies the drain waits for

	intents    *fanout.Queue[engine.Intent] // supervision.intent feed, once subscribed
	hostEvents *fanout.Queue[host.Event]    // host.event feed, once subscribed
	events     *fanout.Queue[feedEvent]     // events.event feed, once subscribed
	eventSub   *eventSub                    // the events.subscribe in force, if any
	toolEvents *fanout.Queue[streams.Event] // tools.stream.event feed, once subscribed
	feeds      []closer                     // every feed above that was made, for run to close

	ignoredChunks   atomic.Uint64 // tools.stream.chunk notifications ignored, for rate-limited logging
	unmatched       atomic.Uint64 // replies that matched no callback
	unmatchedLogged atomic.Int64  // when the last of them was logged at warn, in Unix nanoseconds
	runs            connRuns      // agent binding, current run, runs.trace.event subscriptions

	replan atomic.Pointer[protocol.ReplanConfig] // replan.set_config; nil is max_replans 0
	budget atomic.Pointer[costBudget]            // session.budget.set; nil is unbounded
}

// newConn prepares a connection; start serves it.
func newConn(s *Server, id string, ws *websocket.Conn) *conn {
	dctx, dcancel := context.WithCancelCause(context.Background())
	hctx, hcancel := context.WithCancelCause(dctx)
	c := &conn{
		hctx:    hctx,
		hcancel: hcancel,
		dctx:    dctx,
		dcancel: dcancel,
		srv:     s,
		id:      id,
		log:     connLog{base: s.connLog, id: id},
		ws:      ws,
		sem:     make(chan struct{}, s.opts.MaxInFlight),
		ready:   make(chan struct{}),

		authWaited: make(chan struct{}),
		authDone:   make(chan struct{}),
		evict:      make(chan struct{}),
		opened:     time.Now(),
	}
	c.authed.Store(s.opts.Token == "")
	ws.SetReadLimit(s.opts.MaxFrameBytes)
	return c
}

// start serves the connection from now on and returns: the JSON-RPC
// library reads it on its own goroutine, and when it ends for any reason the
// library closes its stream, which runs finish. The server has counted the
// connection in connWG; finish releases it.
func (c *conn) start(remote string) {
	c.sess = c.srv.rt.OpenSession(c.id, c)
	c.sess.RequestedBy = c.requester
	c.remote = remote
	c.log.Info("connection opened", zap.String("remote", remote))
	metrics.Connections.Inc()
	if c.authed.Load() {
		close(c.authWaited)
	} else {
		go func() {
			defer close(c.authWaited)
			c.awaitAuth()
		}()
	}
	// The reads take no context: a read waiting under one would register a
	// cancel hook per frame. The connection ends by closing it (drain, or
	// the library's Close), which ends the read.
	c.stream = wsstream.New(context.Background(), c.ws, c.srv.opts.WriteTimeout, checkFrame)
	c.rpc = jsonrpc2.NewConn(context.Background(), connStream{Stream: c.stream, c: c}, c, jsonrpc2.SetLogger(jsonrpcLogger{c.log}), jsonrpc2.OnRecv(c.answered), jsonrpc2.OnSend(c.sending))
	close(c.ready)
}

// connStream is the connection's JSON-RPC stream. The library closes it
// exactly once, when the connection ends (the peer went away, a read or a
// write failed, or the daemon closed it), and that starts finish.
type connStream struct {
	*wsstream.Stream
	c *conn
}

// ReadObject waits for the next message shallow in the stack (see
// pooledConn), then reads it.
func (s connStream) ReadObject(v any) error {
	if s.c.socket != nil {
		s.c.socket.awaitData()
		s.c.spoke.Store(true)
	}
	err := s.Stream.ReadObject(v)
	s.c.spoke.Store(true)
	return err
}

func (s connStream) Close() error {
	go s.c.finish()
	return s.Stream.Close()
}

// finish runs once the connection has ended: it waits for its handlers,
// drops its session, and releases it from the server.
func (c *conn) finish() {
	<-c.ready
	defer c.srv.release(c)
	defer metrics.Connections.Dec()
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.hcancel(errDisconnected)
	<-c.authWaited
	c.handlers.Wait()
	c.exempt.Wait()
	c.dcancel(errDisconnected) // no request is left to use it
	c.srv.rt.CloseSession(c.sess)
	c.srv.host.DropConnection(c.id) // its agents go, with agent.unregistered
	c.endEventSub()
	for _, q := range c.feeds { // no handler is left to make one
		q.Close()
	}
	c.endRuns()
	c.log.Info("connection closed")
}

// closer is a feed queue, as run closes it.
type closer interface{ Close() }

// feed returns the notification queue in *slot, made on first use with the
// connection's feed bounds; run closes every feed when the connection ends.
// Every live feed of a connection is made here.
func feed[T any](c *conn, slot **fanout.Queue[T], send fanout.SendFunc[T]) *fanout.Queue[T] {
	c.mu.Lock()
	defer c.mu.Unlock()
	if *slot == nil {
		*slot = fanout.New(send, c.feedOptions())
		c.feeds = append(c.feeds, *slot)
	}
	return *slot
}

// feedOptions bound every feed queue of the connection.
func (c *conn) feedOptions() fanout.Options {
	return fanout.Options{Capacity: c.srv.opts.FeedQueue, WriteTimeout: c.srv.opts.WriteTimeout,
		MaxBytes: c.srv.opts.FeedQueueBytes, Size: feedItemBytes, Total: &c.srv.feedBytes}
}

// feedItemBytes is what a queued notification weighs: its payload as JSON,
// counted without encoding it where the type is known.
func feedItemBytes(v any) int64 {
	switch x := v.(type) {
	case host.Event:
		return host.EventBytes(&x)
	case streams.Event:
		return int64(len(x.Handle) + len(x.Owner) + len(x.Chunk))
	case feedEvent:
		return engine.EventBytes(&x.event)
	}
	return jsonvalue.Size(v, math.MaxInt64)
}

// Handle is called on the read loop for every request. It never blocks on
// handler work: auth is decided inline, everything else runs on its own
// goroutine within the in-flight bound.
func (c *conn) Handle(_ context.Context, _ *jsonrpc2.Conn, req *jsonrpc2.Request) {
	<-c.ready
	if req.Method == protocol.MethodSessionAuth {
		res, err := c.handleAuth(req)
		c.reply(req, res, err)
		if closing := (*closeAfterReply)(nil); errors.As(err, &closing) {
			c.closeRevoked(closing.agent)
		}
		return
	}
	if !c.authed.Load() {
		c.log.Warn("request before session.auth; closing", zap.String("method", echoName(req.Method)))
		c.reply(req, nil, rpcError(protocol.CodeAuthRequired,
			"auth required: the first request on a connection must be session.auth {token}; closing the connection"))
		c.goOwned(func() { _ = c.ws.Close(websocket.StatusPolicyViolation, "auth required") })
		return
	}
	if req.Notif {
		if c.needsHandshake(req.Method) != nil {
			return // a notification has no reply to carry the refusal
		}
		c.handleNotification(req)
		return
	}
	c.mu.Lock()
	// A supervisor must still be able to release proposals parked while the
	// daemon drains; the drain waits for those replies before it closes.
	wg := &c.handlers
	if c.draining {
		wg = &c.exempt
	}
	if c.closed || (c.draining && (!drainExempt[req.Method] || c.sealed)) {
		c.mu.Unlock()
		c.reply(req, nil, internalError("car-server is shutting down; retry after it restarts"))
		return
	}
	select {
	case c.sem <- struct{}{}:
	default:
		c.mu.Unlock()
		c.reply(req, nil, internalError("too many requests in flight on this connection (limit %d); wait for replies before sending more", cap(c.sem)))
		return
	}
	wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer wg.Done()
		res, err := c.serve(req)
		// Free the slot before replying: a client that sends its next request
		// as soon as it reads this reply is within the limit.
		<-c.sem
		c.reply(req, res, err)
	}()
}

// drainExempt are the methods still served while the daemon drains.
var drainExempt = map[string]bool{
	protocol.MethodSupervisionDecide:  true,
	protocol.MethodSupervisionPending: true,
}

// goOwned runs f on a goroutine the connection waits for.
func (c *conn) goOwned(f func()) {
	c.mu.Lock()
	if c.closed || c.draining {
		c.mu.Unlock()
		return
	}
	c.handlers.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.handlers.Done()
		f()
	}()
}

// serve runs one request under its deadline and returns its reply.
func (c *conn) serve(req *jsonrpc2.Request) (any, error) {
	start := time.Now()
	m, ok := methods[req.Method]
	if !ok {
		// One label for every unknown name keeps the metric's cardinality bounded.
		metrics.Requests.WithLabelValues("unknown", metrics.Code(protocol.CodeMethodNotFound)).Inc()
		return nil, rpcError(protocol.CodeMethodNotFound,
			"method not found: '%s'; docs/protocol.md lists the methods this daemon serves", echoName(req.Method))
	}
	if err := c.needsHandshake(req.Method); err != nil {
		metrics.Requests.WithLabelValues(req.Method, errorCode(err)).Inc()
		return nil, err
	}
	if err := c.mayCall(req.Method); err != nil {
		metrics.Requests.WithLabelValues(req.Method, errorCode(err)).Inc()
		c.log.Info("request refused", zap.String("method", req.Method), zap.String("principal", c.principal()))
		return nil, err
	}
	timeout := c.srv.opts.HandlerTimeout
	parent := c.dctx
	if m.followsClient {
		parent = c.hctx
	}
	ctx, cancel := context.WithTimeout(parent, timeout)
	if m.budgeted {
		// The handler sets its deadline itself, once its params are decoded.
		ctx, cancel = context.WithCancel(parent)
	}
	var logTrace *requestTrace
	if c.srv.opts.Tracer != nil {
		ctx, logTrace = withRequestTrace(clientTraceContext(ctx, req.Params))
	}
	res, err := m.handle(c, ctx, req.Params)
	deadlineHit := errors.Is(ctx.Err(), context.DeadlineExceeded)
	cancel()
	if deadlineHit {
		err = deadlineError(req.Method, timeout)
	}
	metrics.Requests.WithLabelValues(req.Method, errorCode(err)).Inc()
	fields := []zap.Field{zap.String("method", req.Method), zap.Float64("duration_ms", engine.MsSince(start))}
	if logTrace != nil {
		fields = append(fields, tracing.LogFields(logTrace.sc)...)
	}
	if err != nil {
		c.log.Info("request failed", append(fields, zap.String("error", err.Error()))...)
	} else {
		c.log.Debug("request served", fields...)
	}
	return res, err
}

// reply sends the response to req; nothing is sent for a notification.
func (c *conn) reply(req *jsonrpc2.Request, result any, err error) {
	if req.Notif {
		return
	}
	resp := &jsonrpc2.Response{ID: req.ID}
	send := func(resp *jsonrpc2.Response) error {
		sendErr := c.rpc.SendResponse(context.Background(), resp)
		if sendErr != nil && !errors.Is(sendErr, jsonrpc2.ErrClosed) {
			c.log.Debug("reply not sent", zap.String("method", req.Method), zap.Error(sendErr))
		}
		return nil
	}
	if err == nil {
		if err = sendResult(resp, result, send); err == nil {
			return
		}
		err = internalError("encode result: %v", err)
	}
	var rerr *jsonrpc2.Error
	if !errors.As(err, &rerr) {
		rerr = &jsonrpc2.Error{Code: protocol.CodeInternal, Message: err.Error()}
	}
	resp.Error = rerr
	resp.Result = nil
	_ = send(resp)
}

// notify sends a notification under ctx's deadline. The library's write
// takes no context, so when the deadline passes first the connection is
// closed: a peer that cannot take a notification in time has stopped
// reading. A ctx cancelled for another reason (its feed is closing, say on
// an unsubscribe racing the last delivery) closes nothing: the write
// finishes, bounded by the stream's own write timeout, and the connection
// goes on. A write that fails closes the connection.
func (c *conn) notify(ctx context.Context, method string, params any) error {
	if notifyHook != nil {
		notifyHook(ctx, c, method)
	}
	late := func() bool { return errors.Is(ctx.Err(), context.DeadlineExceeded) }
	gone := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(gone)
		if late() {
			_ = c.ws.CloseNow()
		}
	})
	err := c.rpc.Notify(ctx, method, params)
	if !stop() {
		<-gone
		if late() {
			err = context.Cause(ctx)
		}
	}
	if err == nil {
		return nil
	}
	if c.stream.Overran() && !errors.Is(err, context.DeadlineExceeded) {
		// A write on the stream missed its own timeout first and closed
		// the connection; the library then reports this one as closed.
		err = c.stream.OverrunError()
	}
	_ = c.ws.CloseNow() // a no-op when it is closed already
	if errors.Is(err, context.DeadlineExceeded) {
		c.log.Warn("notification missed its write deadline; the peer has stopped reading, closing the connection",
			zap.String("method", method), zap.Duration("write_timeout", c.srv.opts.WriteTimeout))
	}
	return fmt.Errorf("%s not sent; the connection is closed: %w", method, err)
}

// notifyHook, nil outside this package's tests, is called before each
// notification is written: a test holds it to stand for a subscriber whose
// socket has stopped draining, and releases it to see what the feed did.
var notifyHook func(ctx context.Context, c *conn, method string)

// drain refuses new requests, waits for in-flight ones until ctx ends (and,
// on a supervisor's connection, for parked intents), waits for the replies
// to the drain-exempt requests it served, then closes the connection with
// 1001.
func (c *conn) drain(ctx context.Context) {
	<-c.ready // start does not block: it is about to close ready if it has not
	c.mu.Lock()
	c.draining = true
	c.mu.Unlock()
	if drainHookDraining != nil {
		drainHookDraining(c)
	}
	idle := make(chan struct{})
	go func() {
		c.handlers.Wait() // no Add can follow: draining is set
		close(idle)
	}()
	select {
	case <-idle:
		c.awaitParkedIntents(ctx)
	case <-ctx.Done():
		// Cancel the handlers while the connection is still open, so that
		// their callbacks can send tools.cancel and their replies.
		c.log.Warn("shutdown grace ended with requests in flight; cancelling them")
		c.dcancel(errShuttingDown)
		<-idle
	}
	c.mu.Lock()
	c.sealed = true
	c.mu.Unlock()
	if drainHookSealed != nil {
		drainHookSealed(c)
	}
	c.exempt.Wait() // no Add can follow: sealed is set
	_ = c.ws.Close(websocket.StatusGoingAway, "car-server shutting down")
	_ = c.rpc.Close() // ErrClosed when the close above ended it already
}

// awaitParkedIntents keeps a supervisor's connection open while proposals
// wait for a decision, so that it can still release them; the grace period
// bounds the wait, and a supervisor that disconnects ends it.
func (c *conn) awaitParkedIntents(ctx context.Context) {
	if !c.srv.rt.Supervisors.Subscribed(c.id) {
		return
	}
	select {
	case <-c.srv.rt.Supervisors.Idle():
	case <-c.rpc.DisconnectNotify():
	case <-ctx.Done():
	}
}

// Test hooks, nil outside this package's tests: a draining connection calls
// drainHookDraining once it refuses new work, and drainHookSealed once it
// has stopped serving the drain-exempt methods and waits for their replies.
var drainHookDraining, drainHookSealed func(*conn)

var (
	errDisconnected = errors.New("the client disconnected")
	errShuttingDown = errors.New("car-server is shutting down")
)

// errorCode is the JSON-RPC code of err as a metric label ("0" for success).
func errorCode(err error) string {
	if err == nil {
		return "0"
	}
	var rerr *jsonrpc2.Error
	if errors.As(err, &rerr) {
		return metrics.Code(rerr.Code)
	}
	return metrics.Code(protocol.CodeInternal)
}

// jsonrpcLogger sends the jsonrpc2 library's messages to zap at debug level.
type jsonrpcLogger struct{ l connLog }

func (j jsonrpcLogger) Printf(format string, v ...any) {
	j.l.Debug(strings.TrimSpace(fmt.Sprintf(format, v...)))
}

// connLog logs for one connection: every entry carries the connection's id.
// It adds the field per entry, where zap's With would keep an encoded copy
// of it (a buffer of its own) in every connection, idle or not.
type connLog struct {
	base *zap.Logger
	id   string
}

func (l connLog) Debug(msg string, fields ...zap.Field) { l.write(zap.DebugLevel, msg, fields) }
func (l connLog) Info(msg string, fields ...zap.Field)  { l.write(zap.InfoLevel, msg, fields) }
func (l connLog) Warn(msg string, fields ...zap.Field)  { l.write(zap.WarnLevel, msg, fields) }
func (l connLog) Error(msg string, fields ...zap.Field) { l.write(zap.ErrorLevel, msg, fields) }

func (l connLog) write(level zapcore.Level, msg string, fields []zap.Field) {
	if ce := l.base.Check(level, msg); ce != nil {
		ce.Write(append([]zap.Field{zap.String("conn", l.id)}, fields...)...)
	}
}

// methodFunc handles one method's params on a connection.
type methodFunc func(c *conn, ctx context.Context, params *json.RawMessage) (any, error)

// method is an entry of the method table. A budgeted method gets no handler
// deadline from serve: it derives its own from what it decoded (never lower
// than the handler timeout) and reports it with deadlineError.
type method struct {
	handle   methodFunc
	budgeted bool
	// followsClient ends the request when the client disconnects: its work
	// runs through the client's callbacks, or serves only its reply.
	// Without it, a request that was read is served to its end.
	followsClient bool
}

// deadlineError is the reply to a request that ran past its deadline.
func deadlineError(method string, timeout time.Duration) error {
	return rpcError(protocol.CodeHandlerDeadline,
		"handler '%s' exceeded its %s response deadline; the operation may have committed, so check with a read before retrying",
		method, timeout)
}
