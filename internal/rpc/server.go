package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/internal/agents"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/host"
	"github.com/parslee-ai/car-server/internal/metrics"
	"github.com/parslee-ai/car-server/internal/runs"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/ui"
	"github.com/parslee-ai/car-server/internal/wsstream"
	"github.com/parslee-ai/car-server/protocol"
)

// Options are the server's settings. Zero values take the defaults noted.
type Options struct {
	Token              string        // auth token; empty turns auth off
	HostToken          string        // host token: session.auth {host_token} grants the host role; empty: nobody has it
	ApproverRole       string        // who may approve: ApproverAny (default) or ApproverHost
	Home               string        // the state root, reported in host.subscribe's identity
	AllowedOrigins     []string      // extra Origin host patterns allowed to upgrade (same-host is always allowed)
	AllowedHosts       []string      // Host names (or name:port) a TCP listener answers besides loopback and its own address (see GuardHost)
	MaxFrameBytes      int64         // largest accepted frame (16 MiB)
	MaxConnections     int           // concurrent connections (16384)
	AuthTimeout        time.Duration // an unauthenticated connection is closed with 1008 after this (10 s)
	MaxUnauthenticated int           // unauthenticated connections; past it the oldest silent one is closed (64)
	// EvictionGrace is how young a silent unauthenticated connection is
	// spared when max_unauthenticated makes room (2 s); negative spares none.
	EvictionGrace  time.Duration
	MaxInFlight    int           // concurrent requests per connection (64)
	HandlerTimeout time.Duration // deadline of one request (30 min)
	ToolTimeout    time.Duration // default budget of one tool callback (300 s)
	WriteTimeout   time.Duration // a frame write that takes longer closes the connection (30 s)
	MaxAbandoned   int           // callbacks given up on and still unanswered before the connection is closed (1024)
	FeedQueue      int           // notifications of any live feed (supervision.intent, host.event, events.event, tools.stream.event, runs.trace.event) queued per subscriber before the oldest is dropped (256)
	// What one request may leave behind in memory; zero takes the default.
	MaxActionIDBytes int  // proposal and action ids (protocol.DefaultMaxIDBytes)
	StrictFields     bool // refuse proposals with fields the IR does not know
	// HandshakeOptional serves every method before server.handshake, for
	// old clients (require_handshake = false); by default a method other
	// than session.auth, server.handshake and rpc.discover gets -32005 first.
	HandshakeOptional bool
	// TrajectoryRetentionDays is the longest window tools.feedback and
	// verify.monte_carlo's rate_window_days accept (90).
	TrajectoryRetentionDays int
	// MaxFeedbackTools bounds the tools one tools.feedback names or
	// reports (engine.DefaultMaxTools, the max_tools setting).
	MaxFeedbackTools int

	// MaxPlanCandidates and MaxPlanActions bound one proposal.plan or
	// proposal.score: the candidates, and their actions together
	// (DefaultMaxPlanCandidates, engine.DefaultMaxActions).
	MaxPlanCandidates int
	MaxPlanActions    int

	MaxNotifyBytes  int               // params of host.notify and host.set_status: the payload kept in the host event ring (256 KiB)
	MaxContextBytes int               // params of host.request_approval (its context) and host.register_agent (its metadata) (64 KiB)
	FeedQueueBytes  int64             // bytes of any live feed queued per subscriber before the oldest is dropped, besides FeedQueue (16 MiB)
	Version         string            // server_version reported by server.handshake
	Runs            *runs.Store       // run traces (runs.*); nil: the runs methods say they are off
	AgentTokens     store.AgentTokens // the agents' token hashes; nil: no connection can bind an agent
	Postures        *agents.Postures  // per-agent postures (agent_permissions.*); nil: those methods are off
	Leases          store.Leases      // the agents' leases (lease.*); nil: those methods say they are off
	// Lease bounds; zero takes the default (DefaultLease*).
	LeaseDefaultTTL      time.Duration // ttl_ms absent
	LeaseMinTTL          time.Duration // the shortest ttl_ms accepted
	LeaseMaxTTL          time.Duration // the longest ttl_ms accepted
	MaxLeaseAgentIDBytes int           // the longest agent_id lease.* accept
	Store                *store.Store  // the store of the shared parts: /healthz asks its Health, server.status lists its Members; nil: healthy, no members
	Connectors           Connectors    // the daemon's MCP connectors (connectors.*); nil: those methods say they are off
	Logger               *zap.Logger
	// Node and Bus join this daemon's host surface to the other daemons
	// sharing its store: host events and approvals fan out, and approvers
	// anywhere count (see host.Join). Nil Bus: one daemon. Supervision
	// joins through the Runtime (engine.Supervisors.JoinCluster).
	Node string
	Bus  store.Bus
	// Tracer, when set, turns tracing on in the transport: a request's
	// W3C Trace Context (params._meta or top-level traceparent) becomes the
	// parent of the spans it starts, and every tools.execute carries the
	// traceparent of its execute_tool span. Nil: off. The engine's spans
	// take the same tracer through engine.Options.Tracer.
	Tracer trace.Tracer
	// TraceURL is the dashboard's link template to a proposal's trace
	// (otel_trace_url), naming {trace_id}; "" shows the trace id only.
	TraceURL string
}

// Approver roles (Options.ApproverRole).
const (
	ApproverAny  = "any"  // every authenticated connection may approve
	ApproverHost = "host" // only host-role connections may
)

// Defaults of the Options the daemon's settings also offer; config prints
// them in --help. The tool timeout is the engine's (engine.DefaultToolTimeout).
const (
	DefaultMaxFrameBytes      = 16 << 20
	DefaultMaxConnections     = 16384
	DefaultAuthTimeout        = 10 * time.Second
	DefaultMaxUnauthenticated = 64
	DefaultEvictionGrace      = 2 * time.Second
	DefaultMaxInFlight        = 64
	DefaultHandlerTimeout     = 30 * time.Minute
	DefaultMaxNotifyBytes     = 256 << 10
	DefaultMaxContextBytes    = 64 << 10
	DefaultFeedQueueBytes     = 16 << 20
	DefaultMaxPlanCandidates  = 16
)

func (o *Options) setDefaults() {
	if o.ApproverRole == "" {
		o.ApproverRole = ApproverAny
	}
	if o.TrajectoryRetentionDays <= 0 {
		o.TrajectoryRetentionDays = store.DefaultTrajectoryRetentionDays
	}
	if o.MaxFeedbackTools <= 0 {
		o.MaxFeedbackTools = engine.DefaultMaxTools
	}
	if o.MaxPlanCandidates <= 0 {
		o.MaxPlanCandidates = DefaultMaxPlanCandidates
	}
	if o.MaxPlanActions <= 0 {
		o.MaxPlanActions = engine.DefaultMaxActions
	}
	if o.MaxFrameBytes <= 0 {
		o.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if o.MaxConnections <= 0 {
		o.MaxConnections = DefaultMaxConnections
	}
	if o.AuthTimeout <= 0 {
		o.AuthTimeout = DefaultAuthTimeout
	}
	if o.EvictionGrace == 0 {
		o.EvictionGrace = DefaultEvictionGrace
	}
	if o.MaxUnauthenticated <= 0 {
		o.MaxUnauthenticated = DefaultMaxUnauthenticated
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.HandlerTimeout <= 0 {
		o.HandlerTimeout = DefaultHandlerTimeout
	}
	if o.ToolTimeout <= 0 {
		o.ToolTimeout = engine.DefaultToolTimeout
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = wsstream.DefaultWriteTimeout
	}
	if o.MaxActionIDBytes <= 0 {
		o.MaxActionIDBytes = protocol.DefaultMaxIDBytes
	}
	if o.MaxNotifyBytes <= 0 {
		o.MaxNotifyBytes = DefaultMaxNotifyBytes
	}
	if o.MaxContextBytes <= 0 {
		o.MaxContextBytes = DefaultMaxContextBytes
	}
	if o.FeedQueueBytes <= 0 {
		o.FeedQueueBytes = DefaultFeedQueueBytes
	}
	if o.LeaseDefaultTTL <= 0 {
		o.LeaseDefaultTTL = DefaultLeaseTTL
	}
	if o.LeaseMinTTL <= 0 {
		o.LeaseMinTTL = DefaultLeaseMinTTL
	}
	if o.LeaseMaxTTL <= 0 {
		o.LeaseMaxTTL = DefaultLeaseMaxTTL
	}
	if o.MaxLeaseAgentIDBytes <= 0 {
		o.MaxLeaseAgentIDBytes = DefaultMaxLeaseAgentIDBytes
	}
	if o.MaxAbandoned <= 0 {
		o.MaxAbandoned = 1024
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
}

// Server serves the JSON-RPC surface over WebSocket on any number of
// listeners, all backed by one Runtime.
type Server struct {
	opts    Options
	rt      *engine.Runtime
	host    *host.Registry // agents, host approvals and host events
	started time.Time
	log     *zap.Logger
	connLog *zap.Logger // log, with the caller one connLog call further up
	mux     *http.ServeMux

	feedBytes atomic.Int64 // undelivered bytes of every feed queue (server.status)

	mu       sync.Mutex
	conns    map[*conn]struct{}
	https    []*http.Server
	tcpAddrs []string // the TCP addresses served, for server.status
	reserved int      // upgrades in progress, counted against MaxConnections
	pending  []*conn  // unauthenticated connections, oldest first
	evicted  int      // connections told to close for their auth, still in conns but no longer counted
	draining bool
	connWG   sync.WaitGroup

	bound agentBindings // agent id → the one connection bound to it
	mcp   mcpSessions   // the MCP endpoint's sessions (mcpgateway.go)

	leaveHost  func() // stops the host surface's cross-daemon notifications; nil on one daemon
	stopTokens func() // stops following the token store's changes; nil without agent tokens
}

// NewServer returns a server for rt.
func NewServer(rt *engine.Runtime, opts Options) *Server {
	opts.setDefaults()
	s := &Server{opts: opts, rt: rt, log: opts.Logger, conns: make(map[*conn]struct{}), started: time.Now()}
	s.connLog = s.log.WithOptions(zap.AddCallerSkip(2))
	// The runtime's host registry: actions that need an approval wait for
	// a person there, and the host.* methods serve it.
	s.host = rt.Desk()
	if opts.Bus != nil {
		s.leaveHost = s.host.Join(host.Cluster{Node: opts.Node, Bus: opts.Bus})
	}
	if opts.AgentTokens != nil {
		s.stopTokens = s.watchTokens(opts.AgentTokens)
	}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /healthz", s.serveHealth)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}))
	s.mux.Handle("GET "+ui.Prefix, ui.Handler(ui.Options{TraceURL: s.opts.TraceURL}))
	s.mux.HandleFunc("/{$}", s.serveWebSocket)
	return s
}

// Handler returns the HTTP handler: the WebSocket endpoint at "/",
// GET /healthz, GET /metrics and the dashboard under /ui/. It does not check
// Host; Serve puts GuardHost in front of it on a TCP listener.
func (s *Server) Handler() http.Handler { return s.mux }

// Serve accepts connections on l until Shutdown. It returns nil after a
// shutdown. On a TCP listener every request passes GuardHost first.
func (s *Server) Serve(l net.Listener) error {
	hs := &http.Server{
		Handler:           GuardHost(l, s.opts.AllowedHosts, s.log, s.mux),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          zap.NewStdLog(s.log.Named("http")),
	}
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		return http.ErrServerClosed
	}
	s.https = append(s.https, hs)
	if l.Addr().Network() == "tcp" {
		s.tcpAddrs = append(s.tcpAddrs, l.Addr().String())
	}
	s.mu.Unlock()
	err := hs.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// serveHealth answers 200 "ok", or 503 naming the store while the store
// cannot be reached (the daemon keeps serving what needs no store).
func (s *Server) serveHealth(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if st := s.opts.Store; st != nil && st.Health != nil {
		if err := st.Health(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(w, "unavailable: the %s store: %v\n", st.Kind, err)
			return
		}
	}
	_, _ = w.Write([]byte("ok\n"))
}

// ConnectionCount is the number of open WebSocket connections.
func (s *Server) ConnectionCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *Server) serveWebSocket(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	switch {
	case s.draining:
		s.mu.Unlock()
		http.Error(w, "car-server is shutting down; reconnect after it restarts", http.StatusServiceUnavailable)
		return
	case !s.admitLocked():
		s.mu.Unlock()
		s.log.Warn("connection refused: limit reached", zap.Int("limit", s.opts.MaxConnections))
		http.Error(w, "too many connections to car-server; close idle clients or raise max_connections", http.StatusServiceUnavailable)
		return
	}
	s.reserved++
	// Shutdown waits for upgrades in progress too: one that completes after
	// draining began still closes with 1001 before the process exits.
	s.connWG.Add(1)
	s.mu.Unlock()

	// pooledHijack: an idle connection holds no read or write buffer.
	hj := &pooledHijack{ResponseWriter: w}
	ws, err := websocket.Accept(hj, r, &websocket.AcceptOptions{OriginPatterns: s.opts.AllowedOrigins})
	if err != nil {
		s.mu.Lock()
		s.reserved--
		s.mu.Unlock()
		s.connWG.Done()
		// Accept has already answered (403 for a foreign Origin, 400 for a bad upgrade).
		s.log.Warn("websocket upgrade refused", zap.String("origin", r.Header.Get("Origin")), zap.Error(err))
		return
	}
	c := newConn(s, uuid.NewString(), ws)
	c.socket = hj.conn
	s.mu.Lock()
	s.reserved--
	if s.draining {
		s.mu.Unlock()
		_ = ws.Close(websocket.StatusGoingAway, "car-server shutting down")
		s.connWG.Done()
		return
	}
	s.conns[c] = struct{}{}
	s.addPendingLocked(c)
	s.mu.Unlock()
	// The handler returns: the HTTP server's goroutine, with its request,
	// response and buffers, is not kept for the life of the connection.
	c.start(r.RemoteAddr)
}

// release forgets a connection that has finished, and ends its count in
// connWG.
func (s *Server) release(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.dropPendingLocked(c)
	if c.evicted {
		s.evicted--
	}
	s.mu.Unlock()
	s.connWG.Done()
}

// Shutdown stops accepting, lets in-flight requests finish until ctx ends,
// then closes every connection with 1001 (going away) and waits for them.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.draining = true
	https := s.https
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()

	for _, hs := range https {
		_ = hs.Shutdown(ctx)
	}
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.drain(ctx)
		}()
	}
	wg.Wait()
	s.connWG.Wait()
	if s.leaveHost != nil {
		// After the connections: what closing them changed still goes out.
		s.leaveHost()
	}
	if s.stopTokens != nil {
		s.stopTokens()
	}
	s.closeMCP(errShuttingDown)
	return ctx.Err()
}
