package powerfs

import (
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FS is a mounted power-loss file system.
type FS struct {
	backing, mountpoint string
	t                   *tree
	srv                 *fuse.Server
}

// Mount serves the backing directory (created when missing) at mountpoint.
// All of what backing holds is durable. The caller unmounts with Close.
func Mount(backing, mountpoint string) (*FS, error) {
	if err := os.MkdirAll(backing, 0o700); err != nil {
		return nil, fmt.Errorf("powerfs: backing directory: %w", err)
	}
	root, err := load(backing)
	if err != nil {
		return nil, err
	}
	f := &FS{backing: backing, mountpoint: mountpoint}
	if err := f.mount(root); err != nil {
		return nil, err
	}
	return f, nil
}

// Dir is the mount point.
func (f *FS) Dir() string { return f.mountpoint }

func (f *FS) mount(root *node) error {
	f.t = &tree{root: root}
	top := &fsNode{t: f.t, n: root}
	srv, err := gofs.Mount(f.mountpoint, top, &gofs.Options{
		MountOptions: fuse.MountOptions{FsName: "powerfs", Name: "powerfs", DisableXAttrs: true},
	})
	if err != nil {
		return fmt.Errorf("powerfs: mount %s (needs /dev/fuse and fusermount3, Debian package fuse3): %w", f.mountpoint, err)
	}
	f.srv = srv
	return nil
}

// Cut is a power loss: from now on every call on the mount fails; what was
// not durable is discarded but for what loss keeps (rng chooses); the
// mount is unmounted, the durable image replaces the backing directory's
// content, and a fresh mount serves it at the same place. The process that
// used the mount must be dead (or hold no file open on it).
func (f *FS) Cut(loss Loss, rng *rand.Rand) (Lost, error) {
	f.t.mu.Lock()
	f.t.dead = true
	image, lost := cut(f.t.root, loss, rng)
	f.t.mu.Unlock()
	if err := f.unmount(); err != nil {
		return lost, err
	}
	if err := save(image, f.backing); err != nil {
		return lost, err
	}
	return lost, f.mount(image)
}

// Close unmounts cleanly, as a file system does at shutdown: everything is
// made durable and written to the backing directory.
func (f *FS) Close() error {
	if f.srv == nil {
		return nil
	}
	f.t.mu.Lock()
	f.t.dead = true
	image, _ := cut(syncAll(f.t.root, map[*node]bool{}), LoseAll, nil)
	f.t.mu.Unlock()
	if err := f.unmount(); err != nil {
		return err
	}
	return save(image, f.backing)
}

// syncAll syncs every node under n and returns n.
func syncAll(n *node, seen map[*node]bool) *node {
	if seen[n] {
		return n
	}
	seen[n] = true
	n.sync()
	for _, c := range n.entries {
		syncAll(c, seen)
	}
	return n
}

func (f *FS) unmount() error {
	if f.srv == nil {
		return nil // a remount after a cut failed: nothing is mounted
	}
	if err := f.srv.Unmount(); err != nil {
		// A file still open on the mount (a test that failed before
		// closing it): end the connection, or the process would hang at
		// exit flushing that file to a server that is gone.
		f.abort()
		return fmt.Errorf("powerfs: unmount %s: %w", f.mountpoint, err)
	}
	f.srv.Wait()
	f.srv = nil
	return nil
}

// load reads the backing directory into a tree, all of it durable.
func load(dir string) (*node, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("powerfs: %w", err)
	}
	root := newDir(uint32(st.Mode().Perm()))
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("powerfs: %w", err)
	}
	for _, e := range ents {
		path := filepath.Join(dir, e.Name())
		var n *node
		switch {
		case e.IsDir():
			if n, err = load(path); err != nil {
				return nil, err
			}
		case e.Type().IsRegular():
			info, err := e.Info()
			if err != nil {
				return nil, fmt.Errorf("powerfs: %w", err)
			}
			n = newFile(uint32(info.Mode().Perm()))
			if n.data, err = os.ReadFile(path); err != nil {
				return nil, fmt.Errorf("powerfs: %w", err)
			}
			n.synced = n.data
		default:
			return nil, fmt.Errorf("powerfs: %s is neither a file nor a directory", path)
		}
		root.entries[e.Name()] = n
	}
	root.durable = cloneEntries(root.entries)
	return root, nil
}

// save replaces the backing directory's content with the tree. A node
// reached by two names is written once and linked.
func save(root *node, dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("powerfs: %w", err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("powerfs: %w", err)
		}
	}
	return saveDir(root, dir, map[*node]string{})
}

func saveDir(d *node, dir string, written map[*node]string) error {
	for name, n := range d.entries {
		path := filepath.Join(dir, name)
		if at, ok := written[n]; ok && !n.dir {
			if err := os.Link(at, path); err != nil {
				return fmt.Errorf("powerfs: %w", err)
			}
			continue
		}
		written[n] = path
		var err error
		if n.dir {
			if err = os.Mkdir(path, fs.FileMode(n.perm)|0o700); err == nil {
				err = saveDir(n, path, written)
			}
		} else {
			err = os.WriteFile(path, n.data, fs.FileMode(n.perm)|0o600)
		}
		if err != nil {
			return fmt.Errorf("powerfs: %w", err)
		}
	}
	return nil
}

// abort ends the mount's FUSE connection (every call on it fails from then
// on) and detaches it, through the fuse control file system.
func (f *FS) abort() {
	var st syscall.Stat_t
	if syscall.Stat(f.mountpoint, &st) == nil {
		const ctl = "/sys/fs/fuse/connections"
		if _, err := os.Stat(filepath.Join(ctl, "0")); err != nil {
			_ = syscall.Mount("fusectl", ctl, "fusectl", 0, "")
		}
		minor := st.Dev&0xff | (st.Dev>>12)&^0xff
		_ = os.WriteFile(filepath.Join(ctl, fmt.Sprint(minor), "abort"), []byte("1"), 0)
	}
	_ = syscall.Unmount(f.mountpoint, syscall.MNT_DETACH)
	f.srv.Wait()
	f.srv = nil
}
