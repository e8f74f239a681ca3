package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// temporalOptions say where the Temporal peer's module is, which Go
// toolchain builds it (go.temporal.io/server needs a newer Go than
// car-server's), how long its chains are, and the transfer queue's read
// rate of the second, tuned Temporal row.
type temporalOptions struct {
	run            bool
	dir, toolchain string
	steps, chains  int
	tunedPollRPS   int
}

// temporalPeer builds the Temporal peer (bench/peers/temporal, a module of
// its own) and starts it twice: as start-dev configures the server, and
// with history.transferProcessorMaxPollRPS raised (unless
// --temporal-tuned-poll-rps is 0). Each is a Temporal server in its own
// process on the SQLite development configuration, over a file in o.dir,
// with a worker. It returns the systems to measure and a function that
// stops them. When the peer cannot be built (no toolchain, no network for
// it), it returns no system and the reason instead, so that the other rows
// still run.
func temporalPeer(ctx context.Context, o options) (systems []*system, stop func(), notRun string, err error) {
	t := o.temporal
	if !t.run {
		return nil, nil, "left out (--temporal=false)", nil
	}
	bin := filepath.Join(o.dir, "temporal-peer")
	fmt.Fprintf(os.Stderr, "building the Temporal peer in %s with GOTOOLCHAIN=%s (the first build takes minutes)\n", t.dir, t.toolchain)
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	build.Dir = t.dir
	build.Env = append(os.Environ(), "GOTOOLCHAIN="+t.toolchain)
	var stderr bytes.Buffer
	build.Stderr = &stderr
	if err := build.Run(); err != nil {
		return nil, nil, fmt.Sprintf("not built with GOTOOLCHAIN=%s: %s", t.toolchain, lastLine(stderr.String(), err)), nil
	}
	var stops []func()
	stop = func() {
		for _, f := range stops {
			f()
		}
	}
	rates := []int{0}
	if t.tunedPollRPS > 0 {
		rates = append(rates, t.tunedPollRPS)
	}
	for _, rps := range rates {
		s, stopOne, err := startTemporal(ctx, o, bin, rps)
		if err != nil {
			stop()
			return nil, nil, "", err
		}
		stops = append(stops, stopOne)
		systems = append(systems, s)
	}
	return systems, stop, "", nil
}

// startTemporal starts one temporal-peer process (with the transfer queue's
// read rate pollRPS, 0 for the server's default), waits for it to be ready
// and returns it as a system.
func startTemporal(ctx context.Context, o options, bin string, pollRPS int) (*system, func(), error) {
	t := o.temporal
	db := filepath.Join(o.dir, fmt.Sprintf("temporal-%d.db", pollRPS))
	cmd := exec.CommandContext(ctx, bin, "--db", db, "--steps", strconv.Itoa(t.steps), "--chains", strconv.Itoa(t.chains), "--transfer-poll-rps", strconv.Itoa(pollRPS))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	stop := func() {
		in.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}
	out := bufio.NewScanner(outPipe)
	line := func() (string, error) {
		if out.Scan() {
			return out.Text(), nil
		}
		if err := out.Err(); err != nil {
			return "", err
		}
		return "", errors.New("the Temporal peer exited (its error is above)")
	}
	ready, err := line()
	if err != nil {
		stop()
		return nil, nil, err
	}
	var journal string
	var synchronous int
	if _, err := fmt.Sscanf(ready, "ready journal_mode=%s synchronous=%d", &journal, &synchronous); err != nil {
		stop()
		return nil, nil, fmt.Errorf("the Temporal peer said %q: %w", ready, err)
	}
	level := map[int]string{0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[synchronous]
	durability := fmt.Sprintf("SQLite journal_mode=%s, synchronous=%s (start-dev's file configuration sets no pragma: SQLite's defaults)", journal, level)
	if synchronous >= 2 {
		durability = "flushed: every commit; " + durability
	}
	config := "start-dev's configuration"
	if pollRPS > 0 {
		config = fmt.Sprintf("start-dev's but history.transferProcessorMaxPollRPS=%d (default 20)", pollRPS)
	}
	s := &system{
		name:       fmt.Sprintf("Temporal 1.32.2, SQLite file, %s, activities (%d chain(s) of %d per round)", config, t.chains, t.steps),
		durability: durability,
		measure: func(context.Context) (time.Duration, error) {
			if _, err := io.WriteString(in, "measure\n"); err != nil {
				return 0, err
			}
			l, err := line()
			if err != nil {
				return 0, err
			}
			ns, ok := strings.CutPrefix(l, "step_ns ")
			if !ok {
				return 0, fmt.Errorf("the Temporal peer said %q", l)
			}
			n, err := strconv.ParseInt(ns, 10, 64)
			return time.Duration(n), err
		},
	}
	return s, stop, nil
}

// lastLine is the last non-empty line of a command's error output, or the
// error itself when there is none.
func lastLine(s string, err error) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if l := strings.TrimSpace(lines[len(lines)-1]); l != "" {
		return l
	}
	return err.Error()
}
