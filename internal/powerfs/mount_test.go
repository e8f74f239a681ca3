package powerfs

import (
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The rules through the kernel: real system calls on a real mount.

func syncPath(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync %s: %v", path, err)
	}
}

func writeSynced(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	syncPath(t, path)
}

func appendTo(t *testing.T, path, body string, sync bool) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(body); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
}

func cutPower(t *testing.T, f *FS) Lost {
	t.Helper()
	lost, err := f.Cut(LoseAll, rand.New(rand.NewSource(1)))
	if err != nil {
		t.Fatal(err)
	}
	return lost
}

func read(t *testing.T, path string) (string, bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

func TestMountAnUnsyncedAppendVanishesAndASyncedOneStays(t *testing.T) {
	f := MountForTest(t)
	path := filepath.Join(f.Dir(), "j")
	writeSynced(t, path, "a\n")
	syncPath(t, f.Dir())
	appendTo(t, path, "b\n", true)
	appendTo(t, path, "c\n", false)
	if got, _ := read(t, path); got != "a\nb\nc\n" {
		t.Fatalf("before the cut: %q", got)
	}
	if lost := cutPower(t, f); lost.Bytes != 2 {
		t.Fatalf("lost %+v, want the 2 unsynced bytes", lost)
	}
	if got, ok := read(t, path); !ok || got != "a\nb\n" {
		t.Fatalf("after the cut: %q %v, want the synced records only", got, ok)
	}
}

func TestMountAFileWithoutADirectorySyncVanishes(t *testing.T) {
	f := MountForTest(t)
	path := filepath.Join(f.Dir(), "j")
	writeSynced(t, path, "a\n") // its data, not its name
	cutPower(t, f)
	if _, ok := read(t, path); ok {
		t.Fatal("a file whose directory was never synced survived the cut")
	}
	writeSynced(t, path, "a\n")
	syncPath(t, f.Dir())
	cutPower(t, f)
	if got, ok := read(t, path); !ok || got != "a\n" {
		t.Fatalf("after a directory sync: %q %v", got, ok)
	}
}

func TestMountARenameWithoutADirectorySyncCanVanish(t *testing.T) {
	f := MountForTest(t)
	path, tmp := filepath.Join(f.Dir(), "f"), filepath.Join(f.Dir(), "f.tmp")
	writeSynced(t, path, "old")
	syncPath(t, f.Dir())
	writeSynced(t, tmp, "new")
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	cutPower(t, f)
	if got, _ := read(t, path); got != "old" {
		t.Fatalf("a rename without a directory sync: %q, want \"old\"", got)
	}
	writeSynced(t, tmp, "new")
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	syncPath(t, f.Dir())
	cutPower(t, f)
	if got, _ := read(t, path); got != "new" {
		t.Fatalf("a synced rename: %q, want \"new\"", got)
	}
	if _, ok := read(t, tmp); ok {
		t.Fatal("the renamed temp file is back")
	}
}

func TestMountNewDirectoriesAndUnlinks(t *testing.T) {
	f := MountForTest(t)
	dir := filepath.Join(f.Dir(), "a", "b")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeSynced(t, filepath.Join(dir, "f"), "x")
	syncPath(t, dir)
	syncPath(t, filepath.Join(f.Dir(), "a"))
	cutPower(t, f) // the root was never synced: a, and all under it, are gone
	if _, err := os.Stat(filepath.Join(f.Dir(), "a")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a directory whose parent was never synced: %v", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeSynced(t, filepath.Join(dir, "f"), "x")
	for _, d := range []string{dir, filepath.Join(f.Dir(), "a"), f.Dir()} {
		syncPath(t, d)
	}
	cutPower(t, f)
	if got, _ := read(t, filepath.Join(dir, "f")); got != "x" {
		t.Fatalf("a file under synced directories: %q", got)
	}
	if err := os.Remove(filepath.Join(dir, "f")); err != nil {
		t.Fatal(err)
	}
	cutPower(t, f)
	if got, _ := read(t, filepath.Join(dir, "f")); got != "x" {
		t.Fatalf("an unsynced unlink: %q, want the file back", got)
	}
}

// After the cut, nothing reaches the model: the daemon (here, a file held
// open across it) sees EIO, not a write that would land in the new state.
func TestMountRefusesIOAfterTheCut(t *testing.T) {
	f := MountForTest(t)
	path := filepath.Join(f.Dir(), "j")
	writeSynced(t, path, "a")
	syncPath(t, f.Dir())
	f.t.mu.Lock()
	f.t.dead = true
	f.t.mu.Unlock()
	if err := os.WriteFile(path, []byte("b"), 0o600); !errors.Is(err, syscall.EIO) {
		t.Fatalf("a write after the power went: %v, want EIO", err)
	}
	f.t.mu.Lock()
	f.t.dead = false
	f.t.mu.Unlock()
}

func TestMountTornWritesLeaveZeroBytesOrAPrefix(t *testing.T) {
	f := MountForTest(t)
	path := filepath.Join(f.Dir(), "j")
	writeSynced(t, path, "a\n")
	syncPath(t, f.Dir())
	rng := rand.New(rand.NewSource(7))
	for range 20 {
		appendTo(t, path, strings.Repeat("x", 3*pageSize)+"\n", false)
		if _, err := f.Cut(KeepSomePages, rng); err != nil {
			t.Fatal(err)
		}
		got, _ := read(t, path)
		for i := 2; i < len(got); i++ {
			if c := got[i]; c != 'x' && c != 0 && c != '\n' {
				t.Fatalf("byte %d after a torn write is %q", i, c)
			}
		}
		if got[:2] != "a\n" {
			t.Fatalf("the synced record changed: %q", got[:2])
		}
		writeSynced(t, path, "a\n")
	}
}
