package connectors

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"
)

// process is a stdio server's child process. Its stdin and stdout are plain
// pipes the connector owns (exec never copies them), so Wait cannot close
// them under a read; stderr's tail is kept for the error a failed start
// reports.
type process struct {
	cmd    *exec.Cmd
	stdin  *os.File // write end, ours
	stdout *os.File // read end, ours
	stderr *tail
	exited chan struct{} // closed when the process has been waited for
	err    error         // its exit, once exited is closed
}

// killGrace is how long a child has to exit after its stdin closes before
// its process group is killed.
const killGrace = 2 * time.Second

// startProcess runs command in a process group of its own that the daemon's
// death also ends, with env added to the daemon's environment minus its
// CAR_ variables (which hold the daemon's tokens). With a reaper (the
// daemon's connector-run, Linux) the reaper leads the group and kills all
// of it when the daemon dies; without one the command leads it and the
// kernel kills the command alone (procAttr).
func startProcess(reaper []string, command string, args []string, env map[string]string) (*process, error) {
	cmd := exec.Command(command, args...)
	cmd.SysProcAttr = procAttr()
	if len(reaper) > 0 && runtime.GOOS == "linux" {
		cmd = exec.Command(reaper[0], append(append(reaper[1:len(reaper):len(reaper)], command), args...)...)
		cmd.SysProcAttr = reaperAttr()
	}
	cmd.Env = childEnv(env)
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	p := &process{cmd: cmd, stdin: inW, stdout: outR, stderr: &tail{max: 4096}, exited: make(chan struct{})}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, p.stderr
	cmd.WaitDelay = killGrace // a grandchild holding stderr does not hold Wait
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("start %s: %w", command, err)
	}
	go func() {
		p.err = cmd.Wait()
		killGroup(cmd.Process) // what the child left behind in its group
		close(p.exited)
	}()
	return p, nil
}

// stop closes the child's stdin, gives it killGrace to exit, then kills its
// process group; it returns once the child has been waited for.
func (p *process) stop() {
	p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(killGrace):
		killGroup(p.cmd.Process)
		<-p.exited
	}
	p.stdout.Close()
}

// describeExit says how the child ended, with the tail of its stderr, or ""
// while it runs.
func (p *process) describeExit() string {
	select {
	case <-p.exited:
	default:
		return ""
	}
	msg := "the process exited"
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		msg = "the process exited (" + ee.ProcessState.String() + ")"
	}
	if t := strings.TrimSpace(p.stderr.String()); t != "" {
		msg += "; its stderr ends: " + t
	}
	return msg
}

// childEnv is the daemon's environment without its CAR_ variables, plus
// extra.
func childEnv(extra map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CAR_") {
			env = append(env, kv)
		}
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.ToValidUTF8(t.buf, []byte("?")))
}

// lineLimit bounds each newline-delimited message a stdio server sends: past
// max bytes without a newline the read fails with errTooLarge, which ends
// the connection (the SDK cannot resynchronise inside a message).
type lineLimit struct {
	r    io.Reader
	max  int
	n    int // bytes of the current line so far
	over func()
}

var errTooLarge = errors.New("message too large")

func (l *lineLimit) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	for rest := p[:n]; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			l.n += len(rest)
			break
		}
		if l.n += i; l.n > l.max {
			break
		}
		l.n, rest = 0, rest[i+1:]
	}
	if l.n > l.max {
		l.over()
		return 0, errTooLarge
	}
	return n, err
}
