// Command car-bench drives a running car-server with synthetic load and
// reports throughput and proposal latency beside a baseline of raw JSON-RPC
// round trips measured in the same run, over the same stack. The tools are
// answered by car-bench itself. It talks to loopback only and is bounded in
// connections, proposals, actions and time. With --chain it measures the
// per-action cost of actions that run one after another instead: a chain of
// tool calls, each depending on the one before. With --durable-chain it
// sets a chain of idempotent calls, whose every result is on the store
// before the next step, against the same chain without idempotency, a raw
// round trip and a flush of the journal's disk, all in the same run.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/parslee-ai/car-server/internal/fdlimit"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	opts, err := parseArgs(args, stderr)
	if errors.Is(err, errHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "car-bench:", err)
		return 2
	}
	if err := openFiles(opts.Connections+opts.Idle, stderr); err != nil {
		fmt.Fprintln(stderr, "car-bench:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, opts.Duration)
	defer cancel()

	if opts.Spawn != "" {
		d, err := spawnDaemon(ctx, opts.Spawn, opts.Connections+opts.Idle+16, opts.Store, opts.JournalSync, opts.PostgresURL)
		if err != nil {
			fmt.Fprintln(stderr, "car-bench:", err)
			return 1
		}
		defer d.stop()
		opts.URLs, opts.Token, opts.PID, opts.Home = []string{d.url}, d.token, d.pid, d.home
	}
	var rep *report
	switch {
	case opts.DurableChain > 0:
		rep, err = runDurableChain(ctx, opts)
	case opts.Chain > 0:
		rep, err = runChain(ctx, opts)
	default:
		rep, err = runLoad(ctx, opts)
	}
	if rep != nil {
		rep.Daemons = len(opts.URLs)
	}
	if err != nil {
		fmt.Fprintln(stderr, "car-bench:", err)
		return 1
	}
	if opts.JSON {
		err = rep.writeJSON(stdout)
	} else {
		err = rep.writeText(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "car-bench:", err)
		return 1
	}
	if rep.Errors > 0 {
		return 1
	}
	return 0
}

// openFiles raises car-bench's own open-file limit to the hard limit and
// refuses a run it cannot hold: every connection is a file on this end too.
func openFiles(conns int, stderr io.Writer) error {
	need := uint64(conns) + 64 // and the process's own: stdio, the spawned daemon's pipes, the poller
	lim, err := fdlimit.Raise()
	if err != nil {
		fmt.Fprintln(stderr, "car-bench: warning:", err)
		if lim.Soft == 0 {
			return nil // the limit is not known: the run goes ahead
		}
	}
	if lim.Soft < need {
		return fmt.Errorf("%d connections need %d open files, and the limit is %d (hard %d); raise the hard limit (as root: ulimit -Hn or limits.conf) or open fewer connections", conns, need, lim.Soft, lim.Hard)
	}
	return nil
}
