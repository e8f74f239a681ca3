package connectors

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// ReaperCommand is the daemon's hidden subcommand that runs a stdio server
// (Options.Reaper): `car-server connector-run COMMAND ARGS...`.
const ReaperCommand = "connector-run"

// reaperAttr is how the daemon starts the reaper: leader of a process group
// of its own, sent SIGTERM by the kernel when the daemon dies (SIGKILL
// included).
func reaperAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// RunReaper runs args[0] with args[1:] in the reaper's process group, on
// the reaper's own stdin, stdout and stderr, and returns its exit code.
// When the daemon dies the kernel sends the reaper SIGTERM, and the reaper
// kills its whole group: the server and every process the server started,
// which Pdeathsig alone would leave behind.
func RunReaper(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: car-server "+ReaperCommand+" COMMAND [ARGS...] (the daemon runs it; not for people)")
		return 2
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", ReaperCommand, err)
		return 127
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-sigs:
		_ = syscall.Kill(-syscall.Getpgrp(), syscall.SIGKILL) // the reaper too
		return 1
	case err := <-exited:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return 128 + int(ws.Signal())
			}
			return ee.ExitCode()
		}
		if err != nil {
			return 1
		}
		return 0
	}
}
