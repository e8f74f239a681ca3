package powerfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// MountForTest mounts a power-loss file system over a fresh backing
// directory for the test and unmounts it when the test ends. Without
// /dev/fuse or fusermount3 (the Debian package fuse3) it skips the test,
// and under CI=true fails it instead: CI installs the package.
func MountForTest(t testing.TB) *FS {
	t.Helper()
	_, devErr := os.Stat("/dev/fuse")
	_, binErr := exec.LookPath("fusermount3")
	if devErr != nil || binErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("powerfs needs /dev/fuse (%v) and fusermount3 from the Debian package fuse3 (%v)", devErr, binErr)
		}
		t.Skip("needs /dev/fuse and fusermount3 (Debian package fuse3)")
	}
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := Mount(filepath.Join(dir, "backing"), mnt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Error(err)
		}
	})
	return f
}
