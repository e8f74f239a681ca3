package main

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	tserver "go.temporal.io/server/temporal"
	_ "modernc.org/sqlite"
)

const (
	host      = "127.0.0.1"
	namespace = "default"
	taskQueue = "car-peers"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "temporal-peer:", err)
		os.Exit(1)
	}
}

func run(args []string, in io.Reader, out io.Writer) error {
	fs := flag.NewFlagSet("temporal-peer", flag.ContinueOnError)
	db := fs.String("db", "", "the SQLite file of the server's persistence (created with its schema if missing)")
	steps := fs.Int("steps", 100, "activities per chain")
	chains := fs.Int("chains", 1, "chains per measure (one after another)")
	pollRPS := fs.Int("transfer-poll-rps", 0, "history.transferProcessorMaxPollRPS, the rate at which the history shard's transfer queue reads its tasks; 0 leaves the server's default (20)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *db == "" || *steps < 1 || *steps > 10000 || *chains < 1 || *chains > 100 || *pollRPS < 0 {
		return errors.New("--db is required; --steps must be 1 to 10000, --chains 1 to 100, --transfer-poll-rps 0 or more")
	}
	abs, err := filepath.Abs(*db)
	if err != nil {
		return err
	}
	sqlConf, err := prepareDatabase(abs)
	if err != nil {
		return err
	}
	// Read before the server starts: once it runs, its connection may hold
	// the file's lock.
	journal, synchronous, err := sqliteSettings(abs)
	if err != nil {
		return err
	}
	srv, frontend, err := startServer(sqlConf, *pollRPS)
	if err != nil {
		return fmt.Errorf("start the server: %w", err)
	}
	defer srv.Stop()

	quiet := sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	c, err := sdkclient.Dial(sdkclient.Options{HostPort: frontend, Namespace: namespace, Logger: quiet})
	if err != nil {
		return fmt.Errorf("connect to the server: %w", err)
	}
	defer c.Close()
	w := worker.New(c, taskQueue, worker.Options{})
	w.RegisterWorkflow(Chain)
	w.RegisterActivity(Step)
	if err := w.Start(); err != nil {
		return fmt.Errorf("start the worker: %w", err)
	}
	defer w.Stop()

	ctx := context.Background()
	// One chain before the rounds, so that none of them pays for the first
	// (the task queue's creation, the worker's first polls).
	if _, err := measure(ctx, c, *steps, 1); err != nil {
		return err
	}
	fmt.Fprintf(out, "ready journal_mode=%s synchronous=%d\n", journal, synchronous)

	sc := bufio.NewScanner(in)
	for sc.Scan() {
		if sc.Text() != "measure" {
			return fmt.Errorf("unknown command %q (want \"measure\")", sc.Text())
		}
		d, err := measure(ctx, c, *steps, *chains)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "step_ns %d\n", d.Nanoseconds())
	}
	return sc.Err()
}

// Chain is the workflow: n activities one after another, each started only
// when the previous one's completion is recorded in the workflow's history.
func Chain(ctx workflow.Context, n int) (int, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	sum := 0
	for i := 0; i < n; i++ {
		var v int
		if err := workflow.ExecuteActivity(ctx, Step, i).Get(ctx, &v); err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// Step is the trivial activity: it returns its input.
func Step(_ context.Context, i int) (int, error) { return i, nil }

// measure runs chains workflows one after another and returns the mean
// time per activity, from the start request to the workflow's result.
func measure(ctx context.Context, c sdkclient.Client, steps, chains int) (time.Duration, error) {
	t0 := time.Now()
	for i := 0; i < chains; i++ {
		run, err := c.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{TaskQueue: taskQueue}, Chain, steps)
		if err != nil {
			return 0, fmt.Errorf("start the workflow: %w", err)
		}
		var sum int
		if err := run.Get(ctx, &sum); err != nil {
			return 0, fmt.Errorf("the workflow: %w", err)
		}
		if want := steps * (steps - 1) / 2; sum != want {
			return 0, fmt.Errorf("the chain returned %d, want %d", sum, want)
		}
	}
	return time.Since(t0) / time.Duration(chains*steps), nil
}

// prepareDatabase configures SQLite as the CLI's development server does
// for a database file: only mode=rwc (no pragma of its own, so SQLite's
// defaults), the schema set up when the file is new, and the "default"
// namespace.
func prepareDatabase(db string) (*config.SQL, error) {
	sqlConf := &config.SQL{PluginName: sqliteplugin.PluginName, DatabaseName: db, ConnectAttributes: map[string]string{"mode": "rwc"}}
	if _, err := os.Stat(db); errors.Is(err, os.ErrNotExist) {
		if err := sqliteschema.SetupSchema(sqlConf); err != nil {
			return nil, fmt.Errorf("set up the schema: %w", err)
		}
	}
	ns, err := sqliteschema.NewNamespaceConfig("active", namespace, false, nil)
	if err != nil {
		return nil, err
	}
	if err := sqliteschema.CreateNamespaces(sqlConf, ns); err != nil {
		return nil, fmt.Errorf("create the namespace: %w", err)
	}
	return sqlConf, nil
}

// startServer starts frontend, history, matching and worker services in
// this process on that database, configured as the CLI's development
// server configures them: one history shard, loopback ports, and the two
// dynamic settings start-dev changes; pollRPS, when not 0, sets a third.
// It returns the server and the frontend's address.
func startServer(sqlConf *config.SQL, pollRPS int) (tserver.Server, string, error) {
	ports := make([]int, 5)
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, "", err
		}
		ports[i] = p
	}

	frontend := net.JoinHostPort(host, strconv.Itoa(ports[0]))
	var conf config.Config
	conf.Global.Membership.MaxJoinDuration = 30 * time.Second
	conf.Global.Membership.BroadcastAddress = host
	conf.Persistence.DefaultStore = "sqlite-default"
	conf.Persistence.VisibilityStore = "sqlite-default"
	conf.Persistence.NumHistoryShards = 1
	conf.Persistence.DataStores = map[string]config.DataStore{"sqlite-default": {SQL: sqlConf}}
	conf.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10,
		MasterClusterName:        "active",
		CurrentClusterName:       "active",
		ClusterInformation: map[string]cluster.ClusterInformation{"active": {
			Enabled:                true,
			InitialFailoverVersion: 1,
			RPCAddress:             frontend,
			HTTPAddress:            net.JoinHostPort(host, strconv.Itoa(ports[1])),
			ClusterID:              "car-peers",
		}},
	}
	conf.DCRedirectionPolicy.Policy = "noop"
	service := func(port int) config.Service {
		var s config.Service
		s.RPC.GRPCPort = port
		s.RPC.BindOnIP = host
		return s
	}
	fe := service(ports[0])
	fe.RPC.HTTPPort = ports[1]
	conf.Services = map[string]config.Service{
		"frontend": fe,
		"history":  service(ports[2]),
		"matching": service(ports[3]),
		"worker":   service(ports[4]),
	}
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	conf.PublicClient.HostPort = frontend

	hosts := map[primitives.ServiceName]static.Hosts{}
	for name, port := range map[primitives.ServiceName]int{
		primitives.FrontendService: ports[0], primitives.HistoryService: ports[2],
		primitives.MatchingService: ports[3], primitives.WorkerService: ports[4],
	} {
		hosts[name] = static.SingleLocalHost(net.JoinHostPort(host, strconv.Itoa(port)))
	}
	dyn := dynamicconfig.StaticClient{
		dynamicconfig.HistoryCacheHostLevelMaxSize.Key():                 8096,
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key(): 100,
	}
	if pollRPS > 0 {
		// With one shard, every workflow and activity task of every
		// workflow passes through this shard's transfer queue, whose reads
		// the default (20 a second) paces: a step then waits for it.
		dyn[dynamicconfig.TransferProcessorMaxPollRPS.Key()] = pollRPS
	}
	srv, err := tserver.NewServer(
		tserver.WithConfig(&conf),
		tserver.ForServices(tserver.DefaultServices),
		tserver.WithStaticHosts(hosts),
		tserver.WithLogger(log.NewNoopLogger()),
		tserver.WithAuthorizer(authorization.NewNoopAuthorizer()),
		tserver.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return authorization.NewNoopClaimMapper() }),
		tserver.WithDynamicConfigClient(dyn),
	)
	if err != nil {
		return nil, "", err
	}
	if err := srv.Start(); err != nil {
		return nil, "", err
	}
	return srv, frontend, nil
}

// sqliteSettings opens the file as the server's SQLite plugin opens it
// (the same driver, mode=rwc, no pragma) and reads the journal mode, which
// the file keeps, and the synchronous level a connection gets (0 OFF,
// 1 NORMAL, 2 FULL, 3 EXTRA).
func sqliteSettings(db string) (journal string, synchronous int, err error) {
	conn, err := sql.Open("sqlite", "file:"+db+"?mode=rwc")
	if err != nil {
		return "", 0, err
	}
	defer conn.Close()
	if err := conn.QueryRow("PRAGMA journal_mode").Scan(&journal); err != nil {
		return "", 0, fmt.Errorf("read journal_mode: %w", err)
	}
	if err := conn.QueryRow("PRAGMA synchronous").Scan(&synchronous); err != nil {
		return "", 0, fmt.Errorf("read synchronous: %w", err)
	}
	return journal, synchronous, nil
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
