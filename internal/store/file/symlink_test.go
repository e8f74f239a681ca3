package file

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/internal/atomicfile"
)

// A symbolic link planted in the runs directory, named as a run file, is
// refused when the log opens, naming the path, and never read: the index
// reads a run file's last line, and a head its first.
func TestARunFileThatIsASymlinkIsRefused(t *testing.T) {
	root := t.TempDir()
	target := filepath.Join(t.TempDir(), "elsewhere")
	// What an ended run's file holds, so the index would not read more.
	body := `{"key":"00000000","op":"started","started_at":"2026-01-01T00:00:00Z","intent":"secret"}` + "\n" +
		`{"key":"00000001","op":"ended","status":"completed"}` + "\n"
	if err := os.WriteFile(target, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "alice", "r1.jsonl")
	if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	l, _, err := OpenRuns(root)
	if err == nil {
		h, herr := l.Head(context.Background(), "r1")
		l.Close()
		t.Fatalf("OpenRuns followed the link: head %+v, %v", h, herr)
	}
	if !errors.Is(err, atomicfile.ErrSymlink) || !strings.Contains(err.Error(), link) {
		t.Fatalf("OpenRuns with a link at a run file: %v, want ErrSymlink naming %s", err, link)
	}
}

// A symbolic link planted at a file's lock is refused, not opened (which
// would create the file it points at).
func TestALockFileThatIsASymlinkIsRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agent-tokens.json")
	target := filepath.Join(t.TempDir(), "created-elsewhere")
	if err := os.Symlink(target, path+".lock"); err != nil {
		t.Fatal(err)
	}
	unlock, err := lockFile(context.Background(), path)
	if err == nil {
		unlock()
	}
	if !errors.Is(err, atomicfile.ErrSymlink) || !strings.Contains(err.Error(), path+".lock") {
		t.Errorf("lockFile with a link at its lock: %v, want ErrSymlink naming the lock", err)
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the link's target was created: %v", err)
	}
}
