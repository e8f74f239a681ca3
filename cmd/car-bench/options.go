package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/parslee-ai/car-server/internal/netaddr"
	"github.com/spf13/pflag"
)

// Bounds: the load tool must never become a denial of service of its own.
const (
	maxConnections = 10_000
	maxProposals   = 100_000
	maxActions     = 10_000
	maxIdle        = 10_000
	maxDuration    = 30 * time.Minute
)

var errHelp = errors.New("help")

// options are one run's settings.
type options struct {
	URLs        []string // daemons, given connections round-robin
	Token       string
	Spawn       string // a car-server binary to start on a temporary state root
	Connections int
	Proposals   int // per connection
	Actions     int // per proposal
	Chain       int // actions per chained proposal (0: independent actions)
	// DurableChain is the actions of a chain of idempotent calls, run
	// beside the same chain without idempotency (0: not this mode).
	DurableChain int
	FsyncProbes  int    // flushes of the journal's disk, timed between the chains
	FsyncDir     string // where to time them (default: the spawned daemon's state root)
	Store        string // the spawned daemon's store: file or postgres
	JournalSync  string // the spawned daemon's journal_sync: full or proposal
	PostgresURL  string // with --store postgres
	Home         string // the spawned daemon's state root (set by --spawn)
	Baseline     int    // raw round trips per connection
	Idle         int    // idle connections for the memory measurement
	PID          int    // the daemon's pid, for its memory (set by --spawn)
	Duration     time.Duration
	JSON         bool
}

func parseArgs(args []string, out io.Writer) (options, error) {
	var o options
	fs := pflag.NewFlagSet("car-bench", pflag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringArrayVar(&o.URLs, "url", nil, "a daemon's WebSocket URL, loopback only (default ws://127.0.0.1:9100/); repeat it to spread the connections over several daemons, round-robin")
	fs.StringVar(&o.Token, "token", os.Getenv("CAR_AUTH_TOKEN"), "auth token (default $CAR_AUTH_TOKEN)")
	fs.StringVar(&o.Spawn, "spawn", "", "start this car-server binary on a temporary state root, and stop it after")
	fs.IntVar(&o.Connections, "connections", 10, fmt.Sprintf("concurrent connections submitting proposals (1-%d)", maxConnections))
	fs.IntVar(&o.Proposals, "proposals", 10, fmt.Sprintf("proposals per connection (1-%d in all)", maxProposals))
	fs.IntVar(&o.Actions, "actions", 10, fmt.Sprintf("independent tool calls per proposal (1-%d)", maxActions))
	fs.IntVar(&o.Chain, "chain", 0, fmt.Sprintf("instead: proposals of N tool calls, each depending on the one before, on one connection, with the baseline taken before each (1-%d)", maxActions))
	fs.IntVar(&o.DurableChain, "durable-chain", 0, fmt.Sprintf("instead: proposals of N idempotent tool calls, each depending on the one before, alternating with the same chain not idempotent, beside round trips and flushes of the journal's disk (1-%d)", maxActions))
	fs.IntVar(&o.FsyncProbes, "fsync-probes", 300, "with --durable-chain: 8 kB flushes of the journal's disk timed in the run (1-100000)")
	fs.StringVar(&o.FsyncDir, "fsync-dir", "", "with --durable-chain: the directory whose disk is flushed (default: the spawned daemon's state root, where its journals are)")
	fs.StringVar(&o.Store, "store", "file", "with --spawn: the daemon's store, file or postgres")
	fs.StringVar(&o.JournalSync, "journal-sync", "full", "with --spawn: the daemon's journal_sync, full (each idempotent result flushed before the next step) or proposal (a proposal's results flushed once, before its reply)")
	fs.StringVar(&o.PostgresURL, "postgres-url", os.Getenv("CAR_POSTGRES_URL"), "with --spawn --store postgres: the database (default $CAR_POSTGRES_URL); it must be on this machine")
	fs.IntVar(&o.Baseline, "baseline", 200, "raw round trips per connection for the baseline (0 skips it)")
	fs.IntVar(&o.Idle, "idle", 0, fmt.Sprintf("idle connections to open for the memory-per-connection figure (0-%d; needs --spawn or --pid)", maxIdle))
	fs.IntVar(&o.PID, "pid", 0, "the daemon's process id, to read its memory (Linux)")
	fs.DurationVar(&o.Duration, "duration", 5*time.Minute, "stop after this long, whatever is left")
	fs.BoolVar(&o.JSON, "json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return o, errHelp
		}
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.Chain != 0 && (fs.Changed("actions") || fs.Changed("connections") || fs.Changed("idle")) {
		return o, errors.New("--chain runs on one connection and sets the actions per proposal; drop --actions, --connections and --idle")
	}
	if o.Chain != 0 && o.DurableChain != 0 {
		return o, errors.New("give --chain or --durable-chain, not both")
	}
	if o.DurableChain != 0 && (fs.Changed("actions") || fs.Changed("connections") || fs.Changed("idle")) {
		return o, errors.New("--durable-chain runs on one connection and sets the actions per proposal; drop --actions, --connections and --idle")
	}
	if o.Chain != 0 || o.DurableChain != 0 {
		o.Connections = 1
	}
	return o, o.validate()
}

func (o *options) validate() error {
	var errs []string
	check := func(name string, v, lo, hi int) {
		if v < lo || v > hi {
			errs = append(errs, fmt.Sprintf("--%s must be %d to %d, got %d", name, lo, hi, v))
		}
	}
	check("connections", o.Connections, 1, maxConnections)
	check("proposals", o.Proposals, 1, maxProposals)
	check("actions", o.Actions, 1, maxActions)
	check("baseline", o.Baseline, 0, 100_000)
	if o.Chain != 0 {
		check("chain", o.Chain, 1, maxActions)
	}
	check("idle", o.Idle, 0, maxIdle)
	if o.DurableChain != 0 {
		check("durable-chain", o.DurableChain, 1, maxActions)
		check("fsync-probes", o.FsyncProbes, 1, 100_000)
		if o.Spawn == "" && o.FsyncDir == "" {
			errs = append(errs, "--durable-chain without --spawn needs --fsync-dir: the directory of the daemon's journals")
		}
	}
	switch o.Store {
	case "file":
	case "postgres":
		if o.Spawn == "" {
			errs = append(errs, "--store sets the spawned daemon's store; it needs --spawn")
		} else if o.PostgresURL == "" {
			errs = append(errs, "--store postgres needs --postgres-url (or $CAR_POSTGRES_URL)")
		}
	default:
		errs = append(errs, fmt.Sprintf("--store must be file or postgres, got %q", o.Store))
	}
	switch {
	case o.JournalSync != "full" && o.JournalSync != "proposal":
		errs = append(errs, fmt.Sprintf("--journal-sync must be full or proposal, got %q", o.JournalSync))
	case o.JournalSync == "proposal" && o.Spawn == "":
		errs = append(errs, "--journal-sync proposal sets the spawned daemon's journal_sync; it needs --spawn")
	}
	if o.Connections*o.Proposals > maxProposals {
		errs = append(errs, fmt.Sprintf("--connections × --proposals is %d; at most %d proposals in all", o.Connections*o.Proposals, maxProposals))
	}
	if o.Duration <= 0 || o.Duration > maxDuration {
		errs = append(errs, fmt.Sprintf("--duration must be positive and at most %s", maxDuration))
	}
	if o.Idle > 0 && o.Spawn == "" && o.PID == 0 {
		errs = append(errs, "--idle needs --spawn or --pid to read the daemon's memory")
	}
	switch {
	case o.Spawn != "" && len(o.URLs) > 0:
		errs = append(errs, "--spawn starts the daemon it loads; drop --url")
	case o.Spawn == "" && len(o.URLs) == 0:
		o.URLs = []string{"ws://127.0.0.1:9100/"}
	}
	if o.Chain != 0 && len(o.URLs) > 1 {
		errs = append(errs, "--chain runs on one connection to one daemon; give one --url")
	}
	if o.DurableChain != 0 && len(o.URLs) > 1 {
		errs = append(errs, "--durable-chain runs on one connection to one daemon; give one --url")
	}
	if o.Idle > 0 && len(o.URLs) > 1 {
		errs = append(errs, "--idle reads one daemon's memory; give one --url (with --pid), or --spawn")
	}
	if o.Spawn == "" {
		for _, u := range o.URLs {
			if err := loopbackOnly(u); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// loopbackOnly refuses any target that is not this machine.
func loopbackOnly(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") {
		return fmt.Errorf("--url must be a ws:// URL, got %q", raw)
	}
	host := u.Hostname()
	if !netaddr.IsLoopbackHost(host) {
		return fmt.Errorf("--url must point at loopback (127.0.0.1, ::1 or localhost); car-bench does not load other machines, got %q", host)
	}
	return nil
}
