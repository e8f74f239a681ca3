package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDaemonRefusesPlantedSymlinks: a symbolic link at the path of the
// token file or of a journal stops the daemon's start with a message naming
// the path, and the file it points at is neither written nor re-moded.
func TestDaemonRefusesPlantedSymlinks(t *testing.T) {
	for _, rel := range []string{"ai.parslee.car/auth-token", "approvals.jsonl"} {
		t.Run(rel, func(t *testing.T) {
			home := t.TempDir()
			target := filepath.Join(t.TempDir(), "victim")
			if err := os.WriteFile(target, []byte("victim\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(home, rel)
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
			cmd := execBinary("--port", "0")
			cmd.Env = append(os.Environ(), "CAR_HOME="+home)
			out, err := cmd.CombinedOutput()
			if code := exitCode(t, err); code != 1 || !strings.Contains(string(out), path) || !strings.Contains(string(out), "symbolic link") {
				t.Fatalf("exit %d, output:\n%s\nwant exit 1 naming %s as a symbolic link", code, out, path)
			}
			st, err := os.Stat(target)
			if err != nil || st.Mode().Perm() != 0o644 {
				t.Fatalf("the link's target was re-moded: %v %v", st, err)
			}
			if b, err := os.ReadFile(target); err != nil || string(b) != "victim\n" {
				t.Fatalf("the link's target was written: %q %v", b, err)
			}
		})
	}
}
