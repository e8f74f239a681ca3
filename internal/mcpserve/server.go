package mcpserve

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/internal/rpc"
)

// Path is where the endpoint answers; HealthPath answers GET with "ok".
const (
	Path       = "/mcp"
	HealthPath = "/mcp/health"
)

// Defaults of the bounds (settings mcp_max_body_bytes,
// mcp_max_sessions_per_principal, mcp_max_calls_per_principal).
const (
	DefaultMaxBodyBytes            = 1 << 20
	DefaultMaxSessionsPerPrincipal = 16
	DefaultMaxCallsPerPrincipal    = 32
	// SessionIdle closes a session no request has used for this long, so
	// that a client that went away without DELETE frees its place.
	SessionIdle = 30 * time.Minute
)

// ProtocolRevision is the newest MCP revision the endpoint negotiates: the
// SDK's newest revision that has sessions (2026-07-28 is sessionless, and
// the endpoint keeps per-session state: the flow gate's history of what
// the session read).
const ProtocolRevision = "2025-11-25"

// Gateway is what the endpoint asks of the daemon: *rpc.Server.
type Gateway interface {
	AuthenticateMCP(ctx context.Context, token string) (rpc.MCPPrincipal, error)
	OpenMCPSession(p rpc.MCPPrincipal, client string) *rpc.MCPSession
}

// Options configure the endpoint; zero bounds take the defaults.
type Options struct {
	Gateway                 Gateway
	MaxBodyBytes            int64
	MaxSessionsPerPrincipal int
	MaxCallsPerPrincipal    int
	AllowedHosts            []string // as the WebSocket listener's (rpc.GuardHost)
	AllowedOrigins          []string // as the WebSocket listener's (rpc.GuardOrigin)
	// TokenHint says where the daemon's token is, for the 401 body.
	TokenHint string
	Version   string
	Logger    *zap.Logger
}

func (o *Options) setDefaults() {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxSessionsPerPrincipal <= 0 {
		o.MaxSessionsPerPrincipal = DefaultMaxSessionsPerPrincipal
	}
	if o.MaxCallsPerPrincipal <= 0 {
		o.MaxCallsPerPrincipal = DefaultMaxCallsPerPrincipal
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
}

// Server is the endpoint. Serve it on a listener with Handler; Close ends
// its sessions.
type Server struct {
	opts Options
	mcp  *mcp.Server
	sdk  *mcp.StreamableHTTPHandler
	log  *zap.Logger

	mu       sync.Mutex
	sessions map[*mcp.ServerSession]*session
	perKey   map[string]*principalUse // by MCPPrincipal.Key
	calls    int                      // calls in flight, every principal's
	draining bool                     // Drain began: no new call is taken
	idle     chan struct{}            // closed once draining with no call in flight
}

// session is one MCP session: the SDK's and the daemon's.
type session struct {
	ss  *mcp.ServerSession
	rpc *rpc.MCPSession
	key string
}

// principalUse is what one principal holds: sessions and calls in flight.
type principalUse struct {
	sessions int
	calls    int
}

// New returns the endpoint.
func New(opts Options) *Server {
	opts.setDefaults()
	s := &Server{opts: opts, log: opts.Logger, sessions: map[*mcp.ServerSession]*session{}, perKey: map[string]*principalUse{}}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "car-server", Version: opts.Version}, &mcp.ServerOptions{
		Instructions: "car-server governs every call: a call may wait for a person's approval, and a refusal comes back as a tool error that says who refused, why and how to get it approved.",
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	s.mcp.AddReceivingMiddleware(s.middleware)
	s.sdk = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{
		MaxRequestBodyBytes: opts.MaxBodyBytes,
		SessionTimeout:      SessionIdle,
		// rpc.GuardHost, in front, is the Host check of every listener.
		DisableLocalhostProtection: true,
	})
	return s
}

// Handler serves the endpoint on l: GET /mcp/health, and /mcp behind the
// Host and Origin checks every listener of the daemon has, and the bearer
// token.
func (s *Server) Handler(l net.Listener) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+HealthPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.Handle(Path, rpc.GuardOrigin(s.opts.AllowedOrigins, s.log, http.HandlerFunc(s.serveMCP)))
	return rpc.GuardHost(l, s.opts.AllowedHosts, s.log, mux)
}

// Drain refuses new calls and waits until the calls in flight have
// returned or ctx ends (shutdown's grace); Close then ends the sessions.
func (s *Server) Drain(ctx context.Context) {
	s.mu.Lock()
	if !s.draining {
		s.draining = true
		s.idle = make(chan struct{})
		if s.calls == 0 {
			close(s.idle)
		}
	}
	idle := s.idle
	s.mu.Unlock()
	select {
	case <-idle:
	case <-ctx.Done():
	}
}

// Close ends every session (shutdown).
func (s *Server) Close() {
	s.mu.Lock()
	all := make([]*session, 0, len(s.sessions))
	for _, se := range s.sessions {
		all = append(all, se)
	}
	s.mu.Unlock()
	for _, se := range all {
		_ = se.ss.Close()
	}
}

// serveMCP authenticates the request and hands it to the SDK, with its
// principal.
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request) {
	p, ok := s.authenticate(w, r)
	if !ok {
		return
	}
	s.withTokenInfo(s.sdk).ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), p)))
}

// use is key's record; callers hold mu.
func (s *Server) use(key string) *principalUse {
	u := s.perKey[key]
	if u == nil {
		u = &principalUse{}
		s.perKey[key] = u
	}
	return u
}

func (s *Server) dropIdleLocked(key string, u *principalUse) {
	if u.sessions == 0 && u.calls == 0 {
		delete(s.perKey, key)
	}
}

// lookup returns the daemon's session for ss (nil before its initialize),
// refusing a request whose principal is not the session's.
func (s *Server) lookup(ctx context.Context, ss *mcp.ServerSession, extra *mcp.RequestExtra) (*session, error) {
	p, err := requestPrincipal(ctx, extra)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	se := s.sessions[ss]
	s.mu.Unlock()
	if se != nil && se.key != p.Key() {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "this MCP session belongs to another principal"}
	}
	return se, nil
}

func requestPrincipal(ctx context.Context, extra *mcp.RequestExtra) (rpc.MCPPrincipal, error) {
	var ti *auth.TokenInfo
	if extra != nil {
		ti = extra.TokenInfo
	}
	p, ok := principalOf(ctx, ti)
	if !ok {
		return rpc.MCPPrincipal{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "the request carries no principal"}
	}
	return p, nil
}

// open opens the daemon's session for ss at its initialize, under the
// request's principal, when the principal has room
// (mcp_max_sessions_per_principal). The session is released when the SDK's
// ends: the client's DELETE, SessionIdle, a failed initialize, shutdown.
func (s *Server) open(ctx context.Context, ss *mcp.ServerSession, extra *mcp.RequestExtra, client string) error {
	p, err := requestPrincipal(ctx, extra)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if _, ok := s.sessions[ss]; ok {
		s.mu.Unlock()
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "this MCP session is initialized already"}
	}
	u := s.use(p.Key())
	if u.sessions >= s.opts.MaxSessionsPerPrincipal {
		s.dropIdleLocked(p.Key(), u)
		s.mu.Unlock()
		s.log.Info("MCP session refused: the principal holds its limit", zap.String("principal", p.String()), zap.Int("limit", s.opts.MaxSessionsPerPrincipal))
		return &jsonrpc.Error{Code: CodeLimit, Message: fmt.Sprintf(
			"%s has %d MCP sessions open, the limit (mcp_max_sessions_per_principal); close one (DELETE /mcp with its Mcp-Session-Id) or wait for an idle one to close after %s",
			p, s.opts.MaxSessionsPerPrincipal, SessionIdle)}
	}
	u.sessions++
	// Opened under mu: opening calls nothing back here.
	se := &session{ss: ss, rpc: s.opts.Gateway.OpenMCPSession(p, client), key: p.Key()}
	s.sessions[ss] = se
	s.mu.Unlock()
	go func() {
		// The session ends when the client ends it or goes idle, or when
		// the daemon ends it (a revoked token, shutdown): either ends the
		// other.
		done := make(chan struct{})
		go func() {
			select {
			case <-se.rpc.Done():
				_ = ss.Close()
			case <-done:
			}
		}()
		_ = ss.Wait()
		close(done)
		se.rpc.Close()
		s.mu.Lock()
		delete(s.sessions, ss)
		u := s.use(se.key)
		u.sessions--
		s.dropIdleLocked(se.key, u)
		s.mu.Unlock()
	}()
	return nil
}

// takeCall takes a place for a call of key's; it refuses when the
// principal's calls in flight fill the limit, or the daemon is shutting
// down.
func (s *Server) takeCall(key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return &jsonrpc.Error{Code: CodeLimit, Message: "car-server is shutting down; call again once it has restarted"}
	}
	u := s.use(key)
	if u.calls >= s.opts.MaxCallsPerPrincipal {
		return &jsonrpc.Error{Code: CodeLimit, Message: fmt.Sprintf(
			"%s has %d calls in flight, the limit (mcp_max_calls_per_principal); wait for one to return before sending another", principalName(key), s.opts.MaxCallsPerPrincipal)}
	}
	u.calls++
	s.calls++
	return nil
}

func (s *Server) releaseCall(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.use(key)
	u.calls--
	s.calls--
	s.dropIdleLocked(key, u)
	if s.draining && s.calls == 0 {
		select {
		case <-s.idle:
		default:
			close(s.idle)
		}
	}
}

// principalName is a principal's key as a person reads it.
func principalName(key string) string {
	if agent, ok := strings.CutPrefix(key, "agent:"); ok {
		return "agent " + agent
	}
	return "plain client"
}

// SessionCount is the number of open sessions.
func (s *Server) SessionCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}
