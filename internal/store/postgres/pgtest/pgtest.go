// Package pgtest gives tests a real PostgreSQL: the server named by
// CAR_TEST_POSTGRES_URL, or a throwaway cluster it starts itself from the
// installed binaries (as a non-root user, since PostgreSQL refuses root).
// Without either, a test skips with one line naming the package to install;
// under CI=true it fails instead, so a green run means the tests ran.
package pgtest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the variable holding a server for the tests to use.
const EnvURL = "CAR_TEST_POSTGRES_URL"

const missing = "PostgreSQL not found: install the postgresql package, or set " + EnvURL

var shared struct {
	once sync.Once
	srv  *Server
	err  error
}

// URL returns the URL of a new, empty database for t, dropped when t ends.
func URL(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvURL)
	if base == "" {
		shared.once.Do(func() { shared.srv, shared.err = start() })
		if shared.err != nil {
			unavailable(t, shared.err)
		}
		base = shared.srv.URL("postgres")
	}
	return createDatabase(t, base)
}

// Stop stops the throwaway cluster this process started for URL, if any.
// A package's TestMain calls it after m.Run.
func Stop() {
	if shared.srv != nil {
		shared.srv.stop()
	}
}

// Server is a private throwaway cluster that a test can stop and start
// again, to see what the daemon does while its database is gone.
type Server struct {
	dir     string // socket directory and data directory's parent
	port    int
	as      *syscall.Credential // nil: run as ourselves
	pgCtl   string
	running bool
}

// NewServer starts a private cluster for t, stopped and removed when t ends.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s, err := start()
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(s.stop)
	return s
}

// URL is the server's URL for database db.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://car@/%s?host=%s&port=%d&sslmode=disable", db, url.QueryEscape(s.dir), s.port)
}

// NewDatabase creates an empty database on s for t and returns its URL.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	return createDatabase(t, s.URL("postgres"))
}

// Stop shuts the server down at once (connections are cut).
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	if err := s.ctl("stop", "-m", "immediate", "-w"); err != nil {
		t.Fatalf("stop PostgreSQL: %v", err)
	}
	s.running = false
}

// Start starts a stopped server again, on the same port and data.
func (s *Server) Start(t testing.TB) {
	t.Helper()
	if err := s.startServer(); err != nil {
		t.Fatalf("start PostgreSQL again: %v", err)
	}
}

func unavailable(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%v (CI=true: PostgreSQL is required)", err)
	}
	t.Skip(err.Error())
}

// binDir finds the directory of initdb and pg_ctl.
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Dir(real), nil
		}
		return filepath.Dir(p), nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		return "", errors.New(missing)
	}
	return filepath.Dir(matches[len(matches)-1]), nil
}

func start() (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "car-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, pgCtl: filepath.Join(bin, "pg_ctl")}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			if u, err = user.Lookup("nobody"); err != nil {
				return nil, fmt.Errorf("running as root, and no postgres or nobody user to run PostgreSQL as: %w", err)
			}
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.as = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", s.data(), "-U", "car", "--auth=trust", "-E", "UTF8", "--no-sync")
	if out, err := s.run(initdb); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %w: %s", err, out)
	}
	s.port = 20000 + int(randUint16()%20000)
	if err := s.startServer(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

// startServer starts the cluster for speed without fsync, but with
// synchronous_commit on: a commit's WAL is written to the kernel before it
// is acknowledged, so it survives Stop (an immediate shutdown) as it would a
// crash, and an outage test sees exactly what was committed.
func (s *Server) startServer() error {
	opts := fmt.Sprintf("-c listen_addresses='' -c unix_socket_directories=%s -c port=%d -c fsync=off -c full_page_writes=off -c max_connections=200", s.dir, s.port)
	if err := s.ctl("start", "-w", "-t", "60", "-l", filepath.Join(s.dir, "log"), "-o", opts); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		return fmt.Errorf("pg_ctl start: %w: %s", err, log)
	}
	s.running = true
	return nil
}

func (s *Server) ctl(args ...string) error {
	cmd := exec.Command(s.pgCtl, append(args, "-D", s.data())...)
	out, err := s.run(cmd)
	if err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}

func (s *Server) run(cmd *exec.Cmd) ([]byte, error) {
	if s.as != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.as}
	}
	cmd.Dir = s.dir
	return cmd.CombinedOutput()
}

func (s *Server) stop() {
	if s.running {
		_ = s.ctl("stop", "-m", "immediate", "-w")
		s.running = false
	}
	os.RemoveAll(s.dir)
}

func createDatabase(t testing.TB, base string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to the test PostgreSQL: %v", err)
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("car_test_%x", randUint64())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create a test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return // the server went away with the test; nothing to drop
		}
		defer conn.Close(ctx)
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s is not a URL: %v", EnvURL, err)
	}
	u.Path = "/" + name
	return u.String()
}

func randUint64() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	var v uint64
	for _, x := range b {
		v = v<<8 | uint64(x)
	}
	return v
}

func randUint16() uint16 { return uint16(randUint64()) }
