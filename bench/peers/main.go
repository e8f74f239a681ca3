package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	_ "github.com/dbos-inc/dbos-transact-golang/dbos/driver/sqlite"
	"github.com/jackc/pgx/v5"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

type options struct {
	steps, rounds, chains int
	carBench, carServer   string
	postgres              string
	dir                   string
	temporal              temporalOptions
}

// system is one contestant: measure runs its chains once and returns the
// mean time per step of them.
type system struct {
	name, durability string
	measure          func(ctx context.Context) (time.Duration, error)
	// per step of each round
	samples []time.Duration
}

func run(args []string, out io.Writer) error {
	var o options
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	fs.IntVar(&o.steps, "steps", 100, "steps per chain")
	fs.IntVar(&o.rounds, "rounds", 5, "interleaved rounds; the report is their median")
	fs.IntVar(&o.chains, "chains", 4, "chains per system per round (their mean is the round's figure)")
	fs.StringVar(&o.carBench, "car-bench", "../../bin/car-bench", "the car-bench binary")
	fs.StringVar(&o.carServer, "car-server", "../../bin/car-server", "the car-server binary car-bench spawns")
	fs.StringVar(&o.postgres, "postgres-url", os.Getenv("CAR_TEST_POSTGRES_URL"), "a PostgreSQL on this machine (default $CAR_TEST_POSTGRES_URL); empty leaves the PostgreSQL rows out")
	fs.StringVar(&o.dir, "dir", "", "where the SQLite files go (default: a temporary directory)")
	fs.BoolVar(&o.temporal.run, "temporal", true, "build and run the Temporal peer (its first build takes minutes)")
	fs.StringVar(&o.temporal.dir, "temporal-dir", "temporal", "the Temporal peer's module")
	fs.StringVar(&o.temporal.toolchain, "temporal-toolchain", "go1.27.3", "the GOTOOLCHAIN that builds the Temporal peer")
	fs.IntVar(&o.temporal.steps, "temporal-steps", 100, "activities per Temporal chain")
	fs.IntVar(&o.temporal.chains, "temporal-chains", 1, "Temporal chains per round (a step takes tens of milliseconds)")
	fs.IntVar(&o.temporal.tunedPollRPS, "temporal-tuned-poll-rps", 100, "history.transferProcessorMaxPollRPS of the second Temporal row (start-dev leaves it at 20); 0 leaves that row out")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.steps < 1 || o.steps > 10000 || o.rounds < 1 || o.rounds > 100 || o.chains < 1 || o.chains > 100 {
		return errors.New("--steps must be 1 to 10000, --rounds and --chains 1 to 100")
	}
	if o.dir == "" {
		d, err := os.MkdirTemp("", "car-peers-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		o.dir = d
	}
	ctx := context.Background()

	var systems []*system
	var plain *system
	carFile := &system{name: "car-server, idempotent chain, file store, journal_sync=full", durability: "fsync of the journal per step, before the next step and the reply"}
	plain = &system{name: "car-server, plain chain (`tools.execute` callbacks)", durability: "none: nothing is recorded"}
	flush := &system{name: "one 8 kB fdatasync of the journal's disk (car-bench's probe, in the same runs)", durability: "the disk's flush"}
	var rt []time.Duration
	carFile.measure = func(ctx context.Context) (time.Duration, error) {
		r, err := carBench(ctx, o, "file", "full", "")
		if err != nil {
			return 0, err
		}
		plain.samples = append(plain.samples, r.plain)
		rt = append(rt, r.roundTrip)
		flush.samples = append(flush.samples, r.fdatasync)
		return r.durable, nil
	}
	carProposal := &system{name: "car-server, idempotent chain, file store, journal_sync=proposal", durability: "each step's result written (survives a process crash) and the chain's results flushed by one fsync before the proposal's reply; a power loss can repeat steps of a proposal not yet answered",
		measure: func(ctx context.Context) (time.Duration, error) {
			r, err := carBench(ctx, o, "file", "proposal", "")
			if err != nil {
				return 0, err
			}
			flush.samples = append(flush.samples, r.fdatasync)
			return r.durable, nil
		}}
	systems = append(systems, carFile, carProposal)
	var pgDBOS, pgCar string
	if o.postgres != "" {
		var err error
		if pgCar, err = database(ctx, o.postgres, "car_peers_car"); err != nil {
			return err
		}
		if pgDBOS, err = database(ctx, o.postgres, "car_peers_dbos"); err != nil {
			return err
		}
		systems = append(systems, &system{name: "car-server, idempotent chain, PostgreSQL store, journal_sync=full", durability: "the result's commit flushed (synchronous_commit on) per step; the claim's commit not waited for",
			measure: func(ctx context.Context) (time.Duration, error) {
				r, err := carBench(ctx, o, "postgres", "full", pgCar)
				return r.durable, err
			}}, &system{name: "car-server, idempotent chain, PostgreSQL store, journal_sync=proposal", durability: "each result committed without waiting for its flush (visible to every daemon at once), the chain's results flushed by one synchronous commit before the proposal's reply; a database crash can repeat steps of a proposal not yet answered",
			measure: func(ctx context.Context) (time.Duration, error) {
				r, err := carBench(ctx, o, "postgres", "proposal", pgCar)
				return r.durable, err
			}})
	}
	for _, sync := range []string{"NORMAL", "FULL"} {
		d, err := dbosOnSQLite(ctx, o, sync)
		if err != nil {
			return fmt.Errorf("DBOS on SQLite: %w", err)
		}
		defer d.close()
		note := "WAL, synchronous=NORMAL (DBOS's default): no flush per step; a power loss can lose the last steps"
		if sync == "FULL" {
			note = "WAL, synchronous=FULL: the WAL flushed per step"
		}
		systems = append(systems, &system{name: "DBOS, SQLite, synchronous=" + sync, durability: note, measure: d.measure})
	}
	if pgDBOS != "" {
		d, err := dbosOn(ctx, o, "pg", dbos.Config{DatabaseURL: pgDBOS})
		if err != nil {
			return fmt.Errorf("DBOS on PostgreSQL: %w", err)
		}
		defer d.close()
		systems = append(systems, &system{name: "DBOS, PostgreSQL", durability: "one commit per step, flushed (synchronous_commit on)", measure: d.measure})
	}
	temporal, stopTemporal, temporalNotRun, err := temporalPeer(ctx, o)
	if err != nil {
		return fmt.Errorf("the Temporal peer: %w", err)
	}
	if len(temporal) > 0 {
		defer stopTemporal()
		systems = append(systems, temporal...)
	} else {
		fmt.Fprintln(os.Stderr, "peers: Temporal not run:", temporalNotRun)
	}

	for r := 0; r < o.rounds; r++ {
		// Each round starts with another system, so none is always first
		// after the others' flushes.
		for i := range systems {
			s := systems[(i+r)%len(systems)]
			d, err := s.measure(ctx)
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			s.samples = append(s.samples, d)
			fmt.Fprintf(os.Stderr, "round %d: %s %.0f µs per step\n", r+1, s.name, us(d))
		}
	}
	all := append([]*system{flush, plain}, systems...)
	rtMed := median(rt)
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%d rounds, interleaved; each: %d chains of %d steps per system; median of the rounds (min–max)\n", o.rounds, o.chains, o.steps)
	fmt.Fprintf(tw, "one raw JSON-RPC round trip to car-server (state.exists)\t%.0f µs\t1.00×\t(min–max %.0f–%.0f)\n", us(rtMed), us(minOf(rt)), us(maxOf(rt)))
	for _, s := range all {
		m := median(s.samples)
		fmt.Fprintf(tw, "%s\t%.0f µs\t%.2f×\t(min–max %.0f–%.0f)\t%s\n", s.name, us(m), float64(m)/float64(rtMed), us(minOf(s.samples)), us(maxOf(s.samples)), s.durability)
	}
	if len(temporal) == 0 {
		fmt.Fprintf(tw, "Temporal\tnot run\t—\t—\t%s\n", temporalNotRun)
	}
	return tw.Flush()
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func minOf(ds []time.Duration) time.Duration {
	m := ds[0]
	for _, d := range ds {
		m = min(m, d)
	}
	return m
}

func maxOf(ds []time.Duration) time.Duration {
	m := ds[0]
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// carResult is what one car-bench --durable-chain run measured, per step.
type carResult struct {
	durable, plain, roundTrip, fdatasync time.Duration
}

// carBench runs car-bench --durable-chain against a daemon it spawns on
// the given store (on the file store, under journal_sync sync), and reads
// its JSON report.
func carBench(ctx context.Context, o options, store, sync, pgURL string) (carResult, error) {
	args := []string{"--spawn", o.carServer, "--durable-chain", strconv.Itoa(o.steps), "--proposals", strconv.Itoa(o.chains),
		"--baseline", strconv.Itoa(o.chains * o.steps), "--fsync-probes", strconv.Itoa(25 * o.chains), "--json", "--store", store}
	if sync != "" {
		args = append(args, "--journal-sync", sync)
	}
	if pgURL != "" {
		args = append(args, "--postgres-url", pgURL)
	}
	cmd := exec.CommandContext(ctx, o.carBench, args...)
	cmd.Stderr = io.Discard
	b, err := cmd.Output()
	if err != nil {
		return carResult{}, fmt.Errorf("car-bench %s: %w", strings.Join(args, " "), err)
	}
	var rep struct {
		Durable struct {
			Durable   float64 `json:"durable_step_ms"`
			Plain     float64 `json:"plain_step_ms"`
			RoundTrip float64 `json:"round_trip_ms"`
			Fdatasync float64 `json:"fdatasync_8k_ms"`
		} `json:"durable_chain"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return carResult{}, fmt.Errorf("car-bench's report: %w", err)
	}
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	return carResult{ms(rep.Durable.Durable), ms(rep.Durable.Plain), ms(rep.Durable.RoundTrip), ms(rep.Durable.Fdatasync)}, nil
}

// database creates (once) a database of its own on the server pgURL names,
// and returns its URL.
func database(ctx context.Context, pgURL, name string) (string, error) {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return "", fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return "", err
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			return "", err
		}
	}
	u, err := url.Parse(pgURL)
	if err != nil {
		return "", fmt.Errorf("--postgres-url must be a postgres:// URL: %w", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// dbosRunner is a launched DBOS context with the chain registered.
type dbosRunner struct {
	ctx    dbos.Context
	chains int
	steps  int
}

func dbosOnSQLite(ctx context.Context, o options, synchronous string) (*dbosRunner, error) {
	path := filepath.Join(o.dir, "dbos-"+strings.ToLower(synchronous)+".db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=synchronous("+synchronous+")&_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, err
	}
	return dbosOn(ctx, o, "sqlite-"+strings.ToLower(synchronous), dbos.Config{SQLiteSystemDB: db})
}

func dbosOn(ctx context.Context, o options, name string, cfg dbos.Config) (*dbosRunner, error) {
	cfg.AppName = "car-peers-" + name
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	dctx, err := dbos.NewContext(ctx, cfg)
	if err != nil {
		return nil, err
	}
	d := &dbosRunner{ctx: dctx, chains: o.chains, steps: o.steps}
	dbos.RegisterWorkflow(dctx, d.chain)
	if err := dbos.Launch(dctx); err != nil {
		return nil, err
	}
	// One chain before the rounds, so that none of them pays for the first.
	if _, err := d.measure(ctx); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

// chain is the workflow: n steps one after another, each a trivial
// function whose result DBOS records before the next starts.
func (d *dbosRunner) chain(ctx dbos.Context, n int) (int, error) {
	sum := 0
	for i := 0; i < n; i++ {
		v, err := dbos.RunAsStep(ctx, func(context.Context) (int, error) { return i, nil })
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

func (d *dbosRunner) measure(context.Context) (time.Duration, error) {
	t0 := time.Now()
	for c := 0; c < d.chains; c++ {
		h, err := dbos.RunWorkflow(d.ctx, d.chain, d.steps)
		if err != nil {
			return 0, err
		}
		sum, err := h.GetResult()
		if err != nil {
			return 0, err
		}
		if want := d.steps * (d.steps - 1) / 2; sum != want {
			return 0, fmt.Errorf("the chain returned %d, want %d", sum, want)
		}
	}
	return time.Since(t0) / time.Duration(d.chains*d.steps), nil
}

func (d *dbosRunner) close() {
	dbos.Shutdown(d.ctx, 10*time.Second)
}
