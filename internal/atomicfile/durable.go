package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// syncDir is SyncDir; tests replace it to see which directories are synced.
var syncDir = SyncDir

// SyncDir fsyncs a directory, so that a create, rename or removal in it
// survives a power loss: an fsync of a file makes its data durable, not its
// name.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// MkdirAll is os.MkdirAll with mode 0700 whose new directories survive a
// power loss: each directory it creates is made durable by an fsync of the
// directory that holds it. A directory that already exists costs nothing.
func MkdirAll(dir string) error {
	dir = filepath.Clean(dir)
	var created []string // the directories to create, deepest first
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err == nil {
			if !st.IsDir() {
				return fmt.Errorf("create directory %s: %s is not a directory", dir, d)
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("create directory %s: %w", dir, err)
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(created) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create directory %s: %w", dir, err)
	}
	// Shallowest first: each parent's entry for the new directory.
	for i := len(created) - 1; i >= 0; i-- {
		if err := syncDir(filepath.Dir(created[i])); err != nil {
			return fmt.Errorf("create directory %s: %w", dir, err)
		}
	}
	return nil
}

// OpenDurable is OpenFile with os.O_CREATE for a file whose records must
// survive a power loss (a journal, a spool): its missing directories are
// created as MkdirAll does, and the directory that holds it is fsynced after
// every open, so its name is durable before anything is written to it. The
// fsync runs even when the file already existed: a daemon that was killed
// between creating the file and syncing its directory left a name that is
// not yet durable.
func OpenDurable(path string, flag int, perm os.FileMode) (*os.File, error) {
	dir := filepath.Dir(path)
	if err := MkdirAll(dir); err != nil {
		return nil, err
	}
	f, err := OpenFile(path, flag|os.O_CREATE, perm)
	if err != nil {
		return nil, err
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return f, nil
}
