package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/config"
	"github.com/parslee-ai/car-server/internal/mcpserve"
	"github.com/parslee-ai/car-server/internal/netaddr"
	"github.com/parslee-ai/car-server/internal/rpc"
)

// listenMCP opens the MCP endpoint's listener on mcp_bind; beyond loopback
// it needs auth on, as the WebSocket listener does.
func listenMCP(cfg *config.Config) (net.Listener, error) {
	host, _, _ := net.SplitHostPort(cfg.MCPBind) // checked by config
	if cfg.NoAuth && !netaddr.IsLoopbackHost(host) {
		return nil, &config.UsageError{Msg: fmt.Sprintf("refusing to serve MCP on %s without auth: binding beyond loopback needs auth on (drop --no-auth, or set --mcp-bind to a loopback address or disabled)", cfg.MCPBind)}
	}
	l, err := net.Listen("tcp", cfg.MCPBind)
	if err != nil {
		return nil, fmt.Errorf("listen on %s for MCP: %w (is another daemon using the port? pick another with --mcp-bind, or turn the endpoint off with --mcp-bind disabled)", cfg.MCPBind, err)
	}
	return l, nil
}

// serveMCP serves the MCP endpoint on l until the returned function is
// called with the shutdown's grace: then it stops taking requests, waits
// for those in flight within the grace, and ends its sessions. A listener
// that fails reports on errs.
func serveMCP(cfg *config.Config, srv *rpc.Server, l net.Listener, version string, log *zap.Logger, errs chan<- error) func(context.Context) {
	m := mcpserve.New(mcpserve.Options{
		Gateway:                 srv,
		MaxBodyBytes:            cfg.MCPMaxBodyBytes,
		MaxSessionsPerPrincipal: cfg.MCPMaxSessions,
		MaxCallsPerPrincipal:    cfg.MCPMaxCalls,
		AllowedHosts:            listenHosts(cfg),
		AllowedOrigins:          cfg.AllowedOrigins,
		TokenHint:               cfg.TokenPath,
		Version:                 version,
		Logger:                  log.Named("mcp"),
	})
	hs := &http.Server{Handler: m.Handler(l), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("serve MCP on %s: %w", l.Addr(), err)
		}
	}()
	return func(ctx context.Context) {
		// New connections and calls are refused; the calls in flight get
		// the grace; then the sessions end, which ends their event
		// streams, and the HTTP server with them.
		shut := make(chan error, 1)
		go func() { shut <- hs.Shutdown(ctx) }()
		m.Drain(ctx)
		m.Close()
		if err := <-shut; err != nil {
			_ = hs.Close()
		}
		<-done
	}
}
