package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/client"
)

func TestPrepareSocketDir(t *testing.T) {
	root := t.TempDir()
	mode := func(dir string) os.FileMode {
		t.Helper()
		st, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		return st.Mode().Perm()
	}

	created := filepath.Join(root, "new", "run")
	if err := prepareSocketDir(created); err != nil {
		t.Fatalf("a missing directory: %v", err)
	}
	if m := mode(created); m&0o077 != 0 {
		t.Errorf("the created directory has mode %04o, want nothing for group or others", m)
	}

	readable := filepath.Join(root, "readable")
	if err := os.Mkdir(readable, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(readable, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := prepareSocketDir(readable); err != nil {
		t.Errorf("a directory of ours that only we write to: %v", err)
	}
	if m := mode(readable); m != 0o755 {
		t.Errorf("an accepted directory was changed to %04o", m)
	}

	for _, perm := range []os.FileMode{0o777 | os.ModeSticky, 0o770, 0o703} {
		dir := filepath.Join(root, "shared-"+strings.ReplaceAll(perm.String(), "-", "_"))
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, perm); err != nil {
			t.Fatal(err)
		}
		err := prepareSocketDir(dir)
		if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "writable by its group or others") {
			t.Errorf("mode %v: %v, want a refusal naming the directory", perm, err)
		}
		if m := mode(dir); m != perm.Perm() {
			t.Errorf("a refused directory was changed from %04o to %04o", perm.Perm(), m)
		}
	}

	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := prepareSocketDir(file); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a file as the directory: %v", err)
	}

	// A directory of another user: as root, one chowned away; otherwise
	// the root directory, which is root's.
	foreign := "/"
	if os.Geteuid() == 0 {
		foreign = filepath.Join(root, "foreign")
		if err := os.Mkdir(foreign, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(foreign, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	if err := prepareSocketDir(foreign); err == nil || !strings.Contains(err.Error(), "not to this daemon's user") {
		t.Errorf("another user's directory %s: %v", foreign, err)
	}
}

// TestSocketInASharedDirectoryIsRefused: the daemon refuses --socket in a
// directory others may write to, and leaves its mode alone; a socket whose
// directory does not exist gets a fresh 0700 one and serves.
func TestSocketInASharedDirectoryIsRefused(t *testing.T) {
	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	cmd := execBinary("--port", "0", "--socket", filepath.Join(shared, "x.sock"))
	cmd.Env = append(os.Environ(), "CAR_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if code := exitCode(t, err); code != 1 || !strings.Contains(string(out), shared) || !strings.Contains(string(out), "writable by its group or others") {
		t.Fatalf("exit %d, output:\n%s\nwant a refusal naming %s", code, out, shared)
	}
	if st, err := os.Stat(shared); err != nil || st.Mode().Perm() != 0o777 || st.Mode()&os.ModeSticky == 0 {
		t.Fatalf("the shared directory was changed: %v %v", st.Mode(), err)
	}

	sock := filepath.Join(t.TempDir(), "fresh", "x.sock")
	d := startDaemon(t, t.TempDir(), "CAR_SERVER_SOCKET="+sock)
	if st, err := os.Stat(filepath.Dir(sock)); err != nil || st.Mode().Perm()&0o077 != 0 {
		t.Fatalf("the created socket directory: %v %v", st.Mode(), err)
	}
	c, err := client.Dial(ctxT(t), "ws://car-server/", &client.Options{Token: d.token, SocketPath: sock})
	if err != nil {
		t.Fatalf("dial the socket: %v", err)
	}
	c.Close()
}
