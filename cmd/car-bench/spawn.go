package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// daemon is a car-server started by car-bench.
type daemon struct {
	cmd   *exec.Cmd
	home  string
	url   string
	token string
	pid   int
}

// spawnDaemon starts binary on a temporary state root with a free port and
// waits for it to listen.
func spawnDaemon(ctx context.Context, binary string, maxConns int, store, journalSync, postgresURL string) (*daemon, error) {
	home, err := os.MkdirTemp("", "car-bench-home-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, "--port", "0", "--max-connections", strconv.Itoa(maxConns))
	// The MCP endpoint is off: nothing here uses it, and its fixed default
	// port would make a second daemon on the machine fail to start.
	cmd.Env = append(os.Environ(), "CAR_HOME="+home, "CAR_STORE="+store, "CAR_MCP_BIND=disabled", "CAR_JOURNAL_SYNC="+journalSync)
	if store == "postgres" {
		// In the environment rather than the arguments: a password in the
		// URL does not show in the process list.
		cmd.Env = append(cmd.Env, "CAR_POSTGRES_URL="+postgresURL)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		os.RemoveAll(home)
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(home)
		return nil, fmt.Errorf("start %s: %w", binary, err)
	}
	d := &daemon{cmd: cmd, home: home, pid: cmd.Process.Pid}
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			var line struct {
				Msg       string `json:"msg"`
				Addr      string `json:"addr"`
				TokenFile string `json:"token_file"`
			}
			if sent || json.Unmarshal(sc.Bytes(), &line) != nil || line.Msg != "car-server listening" {
				continue
			}
			tok, err := os.ReadFile(line.TokenFile)
			if err == nil {
				d.url, d.token = "ws://"+line.Addr+"/", string(tok)
			}
			ready <- err
			sent = true
		}
		if !sent {
			ready <- fmt.Errorf("%s exited before it listened", binary)
		}
	}()
	select {
	case err := <-ready:
		if err != nil {
			d.stop()
			return nil, err
		}
		return d, nil
	case <-ctx.Done():
		d.stop()
		return nil, ctx.Err()
	case <-time.After(30 * time.Second):
		d.stop()
		return nil, fmt.Errorf("%s did not start listening within 30s", binary)
	}
}

// stop ends the daemon gracefully and removes its state root.
func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = d.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = d.cmd.Process.Kill()
		<-done
	}
	os.RemoveAll(d.home)
}
