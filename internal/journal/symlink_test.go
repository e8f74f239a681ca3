package journal

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/internal/atomicfile"
)

// A symbolic link planted at a journal's path is refused by Open, Verify
// and Read, naming the path, and what it points at is left alone.
func TestJournalRefusesASymlink(t *testing.T) {
	target := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.WriteFile(target, []byte("not a journal\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "approvals.jsonl")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, atomicfile.ErrSymlink) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s on a symbolic link: %v, want atomicfile.ErrSymlink naming %s", what, err, path)
		}
	}
	j, _, err := Open(path)
	if err == nil {
		j.Close()
	}
	check("Open", err)
	_, err = Verify(path)
	check("Verify", err)
	_, err = Read(path, func(string, []byte) {})
	check("Read", err)
	st, err := os.Stat(target)
	if err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("the target's mode changed: %v %v", st, err)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "not a journal\n" {
		t.Fatalf("the target changed: %q %v", b, err)
	}
}
