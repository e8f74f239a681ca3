// Package atomicfile replaces small files so that a crash leaves the old
// file or the new one, never a part of either: the one way the daemon
// writes its token files, postures, agent tokens and checkpoints. Its
// OpenFile and ReadFile are how the daemon opens its own files: a symbolic
// link at their path is refused, never followed. MkdirAll and OpenDurable
// make new directories and files durable by name (an fsync of the directory
// that holds them), which an fsync of a file's data does not.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write replaces path with data, mode 0600: a temp file beside it, written
// and fsynced, renamed over it, and the directory fsynced. The directory is
// created 0700 when it is missing, durably (MkdirAll). A symbolic link at path is refused
// (ErrSymlink), not replaced.
func Write(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := MkdirAll(dir); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := refuseSymlink(path); err != nil {
		return fmt.Errorf("write %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	err = tmp.Chmod(0o600)
	if err == nil {
		_, err = tmp.Write(data)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
