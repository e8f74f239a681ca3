package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// plantLink makes path a symbolic link to a file holding "target".
func plantLink(t *testing.T, path string) (target string) {
	t.Helper()
	target = filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, []byte("target"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	return target
}

func TestSymlinkAtThePathIsRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "auth-token")
	target := plantLink(t, path)
	for name, do := range map[string]func() error{
		"Write":    func() error { return Write(path, []byte("secret")) },
		"ReadFile": func() error { _, err := ReadFile(path); return err },
		"OpenFile for appending": func() error {
			f, err := OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
			if err == nil {
				f.Close()
			}
			return err
		},
	} {
		err := do()
		if !errors.Is(err, ErrSymlink) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s through a symbolic link: %v, want ErrSymlink naming %s", name, err, path)
		}
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "target" {
		t.Fatalf("the link's target changed: %q %v", b, err)
	}
	if st, err := os.Lstat(path); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v %v", st, err)
	}
}

func TestOpenFileAndReadFileOnPlainFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if _, err := ReadFile(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing file: %v, want ErrNotExist", err)
	}
	f, err := OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("body"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(path); err != nil || string(b) != "body" {
		t.Fatalf("ReadFile = %q %v", b, err)
	}
	// A link in a directory above the file is not the file's own path: it
	// is followed, as the operator may keep the state root behind one.
	linkDir := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(filepath.Dir(path), linkDir); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(filepath.Join(linkDir, "f")); err != nil || string(b) != "body" {
		t.Fatalf("ReadFile through a linked directory = %q %v", b, err)
	}
}
