package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	sddaemon "github.com/coreos/go-systemd/v22/daemon"
	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/config"
	"github.com/parslee-ai/car-server/internal/checkpoint"
	"github.com/parslee-ai/car-server/internal/connectors"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/flow"
	"github.com/parslee-ai/car-server/internal/host"
	"github.com/parslee-ai/car-server/internal/journal"
	"github.com/parslee-ai/car-server/internal/netaddr"
	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/internal/rpc"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/streams"
)

// serve runs the daemon until ctx is cancelled (SIGTERM/SIGINT), then shuts
// down gracefully: stop accepting, let in-flight requests finish within the
// grace period, close connections with 1001, remove the token file.
func serve(ctx context.Context, cfg *config.Config, log *zap.Logger, hup <-chan os.Signal) error {
	raiseFileLimit(log, cfg.MaxConnections)
	if err := ensureDir(cfg.Home); err != nil {
		return err
	}
	if err := ensureDir(filepath.Dir(cfg.LockPath)); err != nil {
		return err
	}
	lock, err := acquireLock(cfg.LockPath)
	if err != nil {
		return err
	}
	defer lock.release()

	token := ""
	if !cfg.NoAuth {
		token = cfg.AuthToken
		if token == "" {
			if token, err = rpc.NewToken(); err != nil {
				return err
			}
		}
	} else if !netaddr.IsLoopbackHost(cfg.Bind) {
		return &config.UsageError{Msg: fmt.Sprintf("refusing to listen on %s without auth: binding beyond loopback needs auth on (drop --no-auth)", cfg.Bind)}
	}

	operator, files, err := policy.LoadDir(cfg.PoliciesDir)
	if err != nil {
		return fmt.Errorf("%w; fix the file (check it with: car-server policy check %s)", err, cfg.PoliciesDir)
	}
	// A journal that cannot compact keeps working (it grows); say so.
	compactionLog := journal.WithErrorLog(func(err error) {
		log.Error("journal compaction failed; the journal keeps working but grows", zap.Error(err))
	})
	node, err := nodeID(cfg.NodeIDPath)
	if err != nil {
		return err
	}
	traces, err := openTracing(ctx, cfg, node, log)
	if err != nil {
		return err
	}
	defer closeTracing(traces, log)
	heads := &headSink{}
	shared, err := openStore(ctx, cfg, node, log, heads, compactionLog)
	if err != nil {
		return err
	}
	defer func() {
		if err := shared.Close(); err != nil {
			log.Warn("closing the store failed", zap.String("store", shared.Kind), zap.Error(err))
		}
	}()

	runStore, postures, err := openRuns(ctx, cfg, shared, log)
	if err != nil {
		return err
	}
	defer postures.Close()
	defer func() {
		if err := runStore.Close(); err != nil {
			log.Warn("closing the run traces failed", zap.Error(err))
		}
	}()

	labels, err := flow.Load(cfg.ToolLabelsPath)
	if err != nil {
		return err
	}
	intent, err := engine.LoadIntentFile(cfg.IntentPath, cfg.Integrity.MaxIntentPatterns, cfg.Integrity.MaxIntentTextBytes)
	if err != nil {
		return fmt.Errorf("%w; fix the file or move it away (a missing intent.json leaves the daemon ungated)", err)
	}
	// The taint ledger is the store's: $CAR_HOME/taint.jsonl for one
	// daemon, a table a cluster shares on PostgreSQL.
	cfg.Integrity.Taint = shared.Taint
	checkpoints, err := checkpoint.Open(cfg.CheckpointsDir, cfg.MaxCheckpoints, cfg.MaxCheckpointBytes)
	if err != nil {
		return err
	}

	// The host registry: the engine parks actions that need an approval
	// there and decides its rows (engine.ResolveApproval); the rpc layer
	// serves the host.* methods from the same one (Runtime.Desk).
	desk := host.New(host.Options{EventRingBytes: cfg.HostEventRingBytes})
	restoreInterrupted(cfg.InterruptedApprovalsPath, desk, log)
	schemaLimits := engine.SchemaLimits{
		MaxBytes: cfg.MaxSchemaBytes, MaxKeywords: cfg.MaxSchemaKeywords, MaxRefDepth: cfg.MaxSchemaRefDepth,
		MaxExpansion: uint64(cfg.MaxSchemaExpansion), MaxEvaluations: uint64(cfg.MaxSchemaEvaluations),
	}
	// The MCP connectors publish their enabled tools here, for every
	// session; a malformed connectors.toml stops the start like a bad
	// policy file.
	daemonTools := engine.NewDaemonTools(schemaLimits)
	var reaper []string
	if exe, err := os.Executable(); err == nil {
		reaper = []string{exe, connectors.ReaperCommand}
	} else {
		log.Warn("the daemon cannot find its own binary; stdio connectors run without the reaper that ends their children when the daemon is killed", zap.Error(err))
	}
	conns := connectors.New(connectors.Options{
		Reaper: reaper,
		Home:   cfg.Home, Tools: daemonTools, MaxConnectors: cfg.MCPMaxConnectors, MaxTools: cfg.MCPMaxTools,
		MaxResultBytes: cfg.MCPMaxResultBytes, ConnectTimeout: cfg.MCPConnectTimeout, Version: version, Logger: log,
	})
	if err := conns.Start(); err != nil {
		return err
	}
	defer conns.Close()
	rt := engine.NewRuntime(engine.Options{
		Desk:                     desk,
		MaxActions:               cfg.MaxActions,
		MaxTools:                 cfg.MaxTools,
		MaxResolvedActionBytes:   cfg.MaxResolvedAction,
		Schemas:                  schemaLimits,
		DaemonTools:              daemonTools,
		MaxResolvedProposalBytes: cfg.MaxResolvedTotal,
		MaxStateValueBytes:       cfg.MaxStateValueBytes,
		EventBytes:               cfg.EventLogBytes,
		MaxConcurrency:           cfg.MaxConcurrency,
		MaxStarting:              cfg.MaxStarting,
		ToolTimeout:              cfg.ToolTimeout,
		Idempotency:              shared.Idempotency,
		Approvals:                shared.Approvals,
		Messages:                 shared.Messages,
		State:                    shared.State,
		Trajectories:             shared.Trajectories,
		Harness:                  shared.Harness,
		SupervisionTimeout:       cfg.SupervisionTimeout,
		ApprovalTimeout:          cfg.ApprovalTimeout,
		MaxApprovalsPerProposal:  cfg.MaxApprovalsPerProposal,
		IntegrityOptions:         cfg.Integrity,
		Streams:                  streams.Options{IdleTimeout: cfg.StreamIdleTimeout, MaxPerOwner: cfg.MaxStreamHandles, MaxChunkBytes: cfg.MaxStreamChunk, MaxBuffered: cfg.MaxStreamBuffered},
		Postures:                 postures,
		Checkpoints:              checkpoints,
		Tracer:                   traces.Tracer(),
		TraceToolArguments:       cfg.TraceToolArguments,
	})
	sweepCtx, stopSweep := context.WithCancel(context.Background())
	sweeping := make(chan struct{})
	go func() { defer close(sweeping); rt.Streams.Run(sweepCtx, 10*time.Second) }()
	defer func() { stopSweep(); <-sweeping }()
	pruned := pruneTrajectories(sweepCtx, shared.Trajectories, cfg.TrajectoryRetentionDays, log)
	defer func() { stopSweep(); <-pruned }()
	if err := rt.LoadHarness(ctx); err != nil {
		return fmt.Errorf("load the harness config: %w", err)
	}
	if err := attachEventLog(ctx, rt, shared, heads, log); err != nil {
		return err
	}
	leaveCluster, err := joinCluster(ctx, rt, shared, log)
	if err != nil {
		return err
	}
	defer leaveCluster()
	rt.SetOperatorPolicies(operator)
	rt.SetToolLabels(labels)
	logToolLabels(log, "tool labels loaded", cfg.ToolLabelsPath, labels)
	rt.SetOperatorIntent(intent)
	logIntent(log, "operator intent loaded", cfg.IntentPath, intent)
	log.Info("operator policies loaded", zap.String("dir", cfg.PoliciesDir), zap.Int("files", files), zap.Int("rules", operator.Len()))
	hostToken := cfg.HostToken
	if hostToken == "" {
		if hostToken, err = rpc.NewToken(); err != nil {
			return err
		}
	}
	srv := rpc.NewServer(rt, rpc.Options{
		Token:                   token,
		HostToken:               hostToken,
		ApproverRole:            cfg.ApproverRole,
		HandshakeOptional:       !cfg.RequireHandshake,
		TrajectoryRetentionDays: cfg.TrajectoryRetentionDays,
		MaxFeedbackTools:        cfg.MaxTools,
		MaxPlanCandidates:       cfg.MaxPlanCandidates,
		MaxPlanActions:          cfg.MaxPlanActions,
		Home:                    cfg.Home,
		AllowedOrigins:          cfg.AllowedOrigins,
		AllowedHosts:            listenHosts(cfg),
		MaxFrameBytes:           cfg.MaxFrameBytes,
		MaxConnections:          cfg.MaxConnections,
		AuthTimeout:             cfg.AuthTimeout,
		MaxUnauthenticated:      cfg.MaxUnauthenticated,
		MaxInFlight:             cfg.MaxInFlight,
		MaxActionIDBytes:        cfg.MaxActionIDBytes,
		StrictFields:            cfg.StrictFields,
		MaxNotifyBytes:          cfg.MaxNotifyBytes,
		MaxContextBytes:         cfg.MaxContextBytes,
		FeedQueueBytes:          cfg.FeedQueueBytes,
		HandlerTimeout:          cfg.HandlerTimeout,
		ToolTimeout:             cfg.ToolTimeout,
		Version:                 version,
		Logger:                  log,
		Runs:                    runStore,
		AgentTokens:             shared.AgentTokens,
		Postures:                postures,
		Store:                   shared,
		Connectors:              conns,
		Node:                    shared.Node,
		Bus:                     clusterBus(shared),
		Tracer:                  traces.Tracer(),
		TraceURL:                cfg.TraceURL,
		Leases:                  shared.Leases,
		LeaseDefaultTTL:         cfg.LeaseDefaultTTL,
		LeaseMinTTL:             cfg.LeaseMinTTL,
		LeaseMaxTTL:             cfg.LeaseMaxTTL,
		MaxLeaseAgentIDBytes:    cfg.MaxLeaseAgentIDBytes,
	})

	tcp, err := net.Listen("tcp", net.JoinHostPort(cfg.Bind, strconv.Itoa(cfg.Port)))
	if err != nil {
		return fmt.Errorf("listen on %s:%d: %w (is another daemon using the port? pick another with --port)", cfg.Bind, cfg.Port, err)
	}
	listeners := []net.Listener{tcp}
	if cfg.Socket != "" {
		ul, err := listenUnix(cfg.Socket)
		if err != nil {
			tcp.Close()
			return err
		}
		listeners = append(listeners, ul)
	}

	var mcpL net.Listener
	if cfg.MCPBind != "" {
		if mcpL, err = listenMCP(cfg); err != nil {
			for _, l := range listeners {
				l.Close()
			}
			return err
		}
	}

	if token != "" {
		if err := writeTokenFile(cfg.TokenPath, token); err != nil {
			for _, l := range listeners {
				l.Close()
			}
			if mcpL != nil {
				mcpL.Close()
			}
			return err
		}
		defer func() {
			if err := os.Remove(cfg.TokenPath); err != nil && !errors.Is(err, os.ErrNotExist) {
				log.Warn("could not remove the auth token file", zap.String("path", cfg.TokenPath), zap.Error(err))
			}
		}()
	}

	// The host token is written on every start, whatever approver_role says:
	// a person's tools (the CLI, a dashboard) read it to take the host role.
	if err := writeTokenFile(cfg.HostTokenPath, hostToken); err != nil {
		for _, l := range listeners {
			l.Close()
		}
		return err
	}
	defer func() {
		if err := os.Remove(cfg.HostTokenPath); err != nil && !errors.Is(err, os.ErrNotExist) {
			log.Warn("could not remove the host token file", zap.String("path", cfg.HostTokenPath), zap.Error(err))
		}
	}()

	if cfg.Pprof != "" {
		stopPprof, err := startPprof(cfg.Pprof, cfg.AllowedHosts, log)
		if err != nil {
			for _, l := range listeners {
				l.Close()
			}
			return err
		}
		defer stopPprof()
	}

	errs := make(chan error, len(listeners)+1)
	var wg sync.WaitGroup
	var mcpAddr string
	stopMCP := func(context.Context) {}
	if mcpL != nil {
		mcpAddr = mcpL.Addr().String()
		stopMCP = serveMCP(cfg, srv, mcpL, version, log, errs)
	}
	for _, l := range listeners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Serve(l); err != nil {
				errs <- fmt.Errorf("serve %s: %w", l.Addr(), err)
			}
		}()
	}
	log.Info("car-server listening",
		zap.String("version", version),
		zap.String("addr", tcp.Addr().String()),
		zap.String("mcp_addr", mcpAddr),
		zap.String("socket", cfg.Socket),
		zap.Bool("auth", token != ""),
		zap.String("token_file", tokenFileField(token, cfg.TokenPath)),
		zap.String("host_token_file", cfg.HostTokenPath),
		zap.String("approver_role", cfg.ApproverRole),
		zap.String("home", cfg.Home),
		zap.String("config_file", cfg.ConfigFile),
		zap.String("store", shared.Kind),
		zap.String("node", node),
	)

	stopNotify := notifyReady(log)
	defer stopNotify()

	var serveErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-hup:
			reloadPolicies(rt, cfg.PoliciesDir, log)
			reloadToolLabels(rt, cfg.ToolLabelsPath, log)
			reloadIntent(rt, cfg, log)
			reloadConnectors(conns, cfg.Home, log)
		case serveErr = <-errs:
			log.Error("listener failed; shutting down", zap.Error(serveErr))
			break loop
		}
	}

	log.Info("shutting down", zap.String("grace", cfg.ShutdownGrace.String()), zap.Int("connections", srv.ConnectionCount()))
	notify(log, sddaemon.SdNotifyStopping)
	// Proposals waiting for a person are answered now, not at the end of
	// the grace; what they waited for is kept for the next start.
	interrupted := desk.PendingHere()
	rt.BeginShutdown()
	defer saveInterrupted(cfg.InterruptedApprovalsPath, interrupted, log)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
	defer cancel()
	// The MCP endpoint first: its calls in flight finish within the grace
	// while the engine is still there.
	stopMCP(sctx)
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("grace period ended before every request finished", zap.Error(err))
	}
	wg.Wait()
	// The engine's parked workers stop; actions still running after the
	// connections closed are given one more grace period, not more.
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		rt.Close()
	}()
	select {
	case <-closed:
	case <-time.After(cfg.ShutdownGrace):
		log.Warn("actions still running after the connections closed; stopping without them", zap.String("grace", cfg.ShutdownGrace.String()))
	}
	if cfg.Socket != "" {
		_ = os.Remove(cfg.Socket)
	}
	log.Info("car-server stopped")
	return serveErr
}

// reloadPolicies re-reads the operator's policy directory. A good set
// replaces the rules in force at once; a bad one keeps them and logs why.
func reloadPolicies(rt *engine.Runtime, dir string, log *zap.Logger) {
	e, files, err := policy.LoadDir(dir)
	if err != nil {
		log.Error("policy reload failed; the previous rules stay in force", zap.String("dir", dir), zap.Error(err))
		return
	}
	rt.SetOperatorPolicies(e)
	log.Info("operator policies reloaded", zap.String("dir", dir), zap.Int("files", files), zap.Int("rules", e.Len()))
}

// reloadConnectors re-reads connectors.toml, as reloadPolicies does the
// policies: a bad file keeps the connectors running.
func reloadConnectors(conns *connectors.Manager, home string, log *zap.Logger) {
	if err := conns.Reload(); err != nil {
		log.Error("connectors reload failed; the connectors running stay", zap.String("path", connectors.FilePath(home)), zap.Error(err))
		return
	}
	log.Info("connectors reloaded", zap.String("path", connectors.FilePath(home)), zap.Int("connectors", len(conns.List().Connectors)))
}

// reloadToolLabels re-reads the information-flow gate's labels file, as
// reloadPolicies does the policies: a bad file keeps the labels in force.
func reloadToolLabels(rt *engine.Runtime, path string, log *zap.Logger) {
	l, err := flow.Load(path)
	if err != nil {
		log.Error("tool labels reload failed; the previous labels stay in force", zap.String("path", path), zap.Error(err))
		return
	}
	rt.SetToolLabels(l)
	logToolLabels(log, "tool labels reloaded", path, l)
}

func logToolLabels(log *zap.Logger, msg, path string, l *flow.Labels) {
	sources, sinks, orderings := l.Counts()
	log.Info(msg, zap.String("path", path), zap.Int("sources", sources), zap.Int("sinks", sinks), zap.Int("orderings", orderings))
}

// notifyReady tells systemd (Type=notify) the daemon is listening and, when
// the unit sets WatchdogSec, keeps the watchdog fed at half its interval. It
// returns a function that stops the keep-alives. Outside systemd it does
// nothing.
func notifyReady(log *zap.Logger) (stop func()) {
	notify(log, sddaemon.SdNotifyReady)
	interval, err := sddaemon.SdWatchdogEnabled(false)
	if err != nil || interval <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(interval / 2)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				notify(log, sddaemon.SdNotifyWatchdog)
			case <-done:
				return
			}
		}
	}()
	log.Info("systemd watchdog keep-alives on", zap.String("interval", interval.String()))
	return func() { close(done); <-stopped }
}

// notify sends one state to systemd's notify socket, if there is one.
func notify(log *zap.Logger, state string) {
	if _, err := sddaemon.SdNotify(false, state); err != nil {
		log.Warn("systemd notify failed", zap.String("state", state), zap.Error(err))
	}
}

// listenUnix listens on path, replacing a stale socket file: the state-root
// lock proves no other daemon of this root is using it. Its directory is
// created, or checked, by prepareSocketDir.
func listenUnix(path string) (net.Listener, error) {
	if err := prepareSocketDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on unix socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("restrict unix socket %s: %w", path, err)
	}
	return l, nil
}

// listenHosts is what the Host check admits besides loopback names and the
// address a request arrived at: allowed_hosts, and bind when it is a name
// (the listener knows only the address it resolved to).
func listenHosts(cfg *config.Config) []string {
	if cfg.Bind == "" || net.ParseIP(cfg.Bind) != nil {
		return cfg.AllowedHosts
	}
	return append(slices.Clip(cfg.AllowedHosts), cfg.Bind)
}

func tokenFileField(token, path string) string {
	if token == "" {
		return ""
	}
	return path
}

// clusterBus is the bus that joins this daemon's host surface to the other
// daemons', or nil for a daemon alone (the file store).
func clusterBus(shared *store.Store) store.Bus {
	if shared.Kind == "file" {
		return nil
	}
	return shared.Bus
}
