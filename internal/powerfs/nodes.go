package powerfs

import (
	"context"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// tree is the model a mount serves, under one lock: FUSE calls come
// concurrently, and a cut must see no call half done.
type tree struct {
	mu   sync.Mutex
	root *node
	dead bool // the power is cut: every call fails with EIO
}

// fsNode serves one node of the model to the kernel. The kernel's view of
// the names (go-fuse's Inode tree) follows the model: every node is a
// persistent inode, added and moved by go-fuse after the model agreed.
type fsNode struct {
	fs.Inode
	t *tree
	n *node
}

// handle is an open file: its flags, for O_APPEND.
type handle struct{ flags uint32 }

var (
	_ fs.NodeOnAdder    = (*fsNode)(nil)
	_ fs.NodeGetattrer  = (*fsNode)(nil)
	_ fs.NodeSetattrer  = (*fsNode)(nil)
	_ fs.NodeCreater    = (*fsNode)(nil)
	_ fs.NodeMkdirer    = (*fsNode)(nil)
	_ fs.NodeUnlinker   = (*fsNode)(nil)
	_ fs.NodeRmdirer    = (*fsNode)(nil)
	_ fs.NodeRenamer    = (*fsNode)(nil)
	_ fs.NodeOpener     = (*fsNode)(nil)
	_ fs.NodeReader     = (*fsNode)(nil)
	_ fs.NodeWriter     = (*fsNode)(nil)
	_ fs.NodeFsyncer    = (*fsNode)(nil)
	_ fs.NodeFlusher    = (*fsNode)(nil)
	_ fs.NodeStatfser   = (*fsNode)(nil)
	_ fs.NodeAllocater  = (*fsNode)(nil)
	_ fs.NodeLinker     = (*fsNode)(nil)
	_ fs.NodeSymlinker  = (*fsNode)(nil)
	_ fs.NodeMknoder    = (*fsNode)(nil)
	_ fs.NodeOpendirer  = (*fsNode)(nil)
	_ fs.NodeReaddirer  = (*fsNode)(nil)
	_ fs.NodeLookuper   = (*fsNode)(nil)
	_ fs.NodeAccesser   = (*fsNode)(nil)
	_ fs.NodeGetxattrer = (*fsNode)(nil)
)

// lock takes the tree's lock, or says EIO once the power is cut.
func (f *fsNode) lock() syscall.Errno {
	f.t.mu.Lock()
	if f.t.dead {
		f.t.mu.Unlock()
		return syscall.EIO
	}
	return 0
}

func (f *fsNode) unlock() { f.t.mu.Unlock() }

// child makes the FUSE node of model node n, a child of f.
func (f *fsNode) child(ctx context.Context, n *node) *fs.Inode {
	c := &fsNode{t: f.t, n: n}
	mode := uint32(syscall.S_IFREG)
	if n.dir {
		mode = syscall.S_IFDIR
	}
	return f.NewPersistentInode(ctx, c, fs.StableAttr{Mode: mode})
}

// OnAdd puts the nodes of a loaded tree under the root, as the mount
// starts (nothing is served yet: no lock). Other nodes are added by the
// calls that create them, with the lock held.
func (f *fsNode) OnAdd(ctx context.Context) {
	if f.n == f.t.root {
		f.addChildren(ctx)
	}
}

func (f *fsNode) addChildren(ctx context.Context) {
	for name, n := range f.n.entries {
		in := f.child(ctx, n)
		f.AddChild(name, in, false)
		if n.dir {
			in.Operations().(*fsNode).addChildren(ctx)
		}
	}
}

// Lookup answers from the model, so the kernel never sees a name the model
// does not hold.
func (f *fsNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := f.lock(); e != 0 {
		return nil, e
	}
	defer f.unlock()
	n, ok := f.n.entries[name]
	if !ok {
		return nil, syscall.ENOENT
	}
	c := f.GetChild(name)
	if c == nil || c.Operations().(*fsNode).n != n {
		return nil, syscall.EIO // the kernel's names and the model's parted: a bug here
	}
	n.attr(&out.Attr)
	return c, 0
}

func (n *node) attr(a *fuse.Attr) {
	if n.dir {
		a.Mode = syscall.S_IFDIR | n.perm
		a.Nlink = 2
		a.Size = 4096
		return
	}
	a.Mode = syscall.S_IFREG | n.perm
	a.Nlink = 1
	a.Size = uint64(len(n.data))
	a.Blocks = (a.Size + 511) / 512
}

func (f *fsNode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if e := f.lock(); e != 0 {
		return e
	}
	defer f.unlock()
	f.n.attr(&out.Attr)
	return 0
}

func (f *fsNode) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if e := f.lock(); e != 0 {
		return e
	}
	defer f.unlock()
	if size, ok := in.GetSize(); ok {
		if f.n.dir {
			return syscall.EISDIR
		}
		f.n.truncate(int64(size))
	}
	if mode, ok := in.GetMode(); ok {
		f.n.perm = mode & 0o7777
	}
	f.n.attr(&out.Attr)
	return 0
}

func (f *fsNode) Access(ctx context.Context, mask uint32) syscall.Errno { return 0 }

func (f *fsNode) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	return 0, syscall.ENODATA
}

func (f *fsNode) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if e := f.lock(); e != 0 {
		return nil, nil, 0, e
	}
	defer f.unlock()
	n := newFile(mode & 0o7777)
	if e := f.n.add(name, n); e != 0 {
		return nil, nil, 0, e
	}
	n.attr(&out.Attr)
	return f.child(ctx, n), &handle{flags: flags}, fuse.FOPEN_DIRECT_IO, 0
}

func (f *fsNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := f.lock(); e != 0 {
		return nil, e
	}
	defer f.unlock()
	n := newDir(mode & 0o7777)
	if e := f.n.add(name, n); e != 0 {
		return nil, e
	}
	n.attr(&out.Attr)
	return f.child(ctx, n), 0
}

func (f *fsNode) Unlink(ctx context.Context, name string) syscall.Errno {
	if e := f.lock(); e != 0 {
		return e
	}
	defer f.unlock()
	return f.n.remove(name, false)
}

func (f *fsNode) Rmdir(ctx context.Context, name string) syscall.Errno {
	if e := f.lock(); e != 0 {
		return e
	}
	defer f.unlock()
	return f.n.remove(name, true)
}

func (f *fsNode) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if flags&^uint32(unix.RENAME_NOREPLACE) != 0 {
		return syscall.EINVAL // no RENAME_EXCHANGE or whiteouts: nothing here uses them
	}
	if e := f.lock(); e != 0 {
		return e
	}
	defer f.unlock()
	to := newParent.(*fsNode)
	return f.n.rename(name, to.n, newName, flags&unix.RENAME_NOREPLACE != 0)
}

// Link, Symlink and Mknod are refused: the daemon makes none.
func (f *fsNode) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.ENOTSUP
}

func (f *fsNode) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.ENOTSUP
}

func (f *fsNode) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.ENOTSUP
}

func (f *fsNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if e := f.lock(); e != 0 {
		return nil, 0, e
	}
	defer f.unlock()
	if flags&syscall.O_TRUNC != 0 && len(f.n.data) > 0 {
		f.n.truncate(0)
	}
	// Direct I/O: every read and write reaches the model, none is served
	// or held by the kernel's page cache.
	return &handle{flags: flags}, fuse.FOPEN_DIRECT_IO, 0
}

func (f *fsNode) Opendir(ctx context.Context) syscall.Errno {
	if e := f.lock(); e != 0 {
		return e
	}
	f.unlock()
	return 0
}

// Readdir lists the model's names.
func (f *fsNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	if e := f.lock(); e != 0 {
		return nil, e
	}
	defer f.unlock()
	list := make([]fuse.DirEntry, 0, len(f.n.entries))
	for name, n := range f.n.entries {
		mode := uint32(syscall.S_IFREG)
		if n.dir {
			mode = syscall.S_IFDIR
		}
		list = append(list, fuse.DirEntry{Name: name, Mode: mode})
	}
	return fs.NewListDirStream(list), 0
}

func (f *fsNode) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if e := f.lock(); e != 0 {
		return nil, e
	}
	defer f.unlock()
	if off >= int64(len(f.n.data)) {
		return fuse.ReadResultData(nil), 0
	}
	n := copy(dest, f.n.data[off:])
	return fuse.ReadResultData(dest[:n]), 0
}

func (f *fsNode) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	if e := f.lock(); e != 0 {
		return 0, e
	}
	defer f.unlock()
	if h, ok := fh.(*handle); ok && h.flags&syscall.O_APPEND != 0 {
		off = int64(len(f.n.data))
	}
	f.n.write(data, off)
	return uint32(len(data)), 0
}

// Fsync makes a file's data, or a directory's entries, durable.
func (f *fsNode) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	if e := f.lock(); e != 0 {
		return e
	}
	defer f.unlock()
	f.n.sync()
	return 0
}

func (f *fsNode) Flush(ctx context.Context, fh fs.FileHandle) syscall.Errno { return 0 }

func (f *fsNode) Allocate(ctx context.Context, fh fs.FileHandle, off uint64, size uint64, mode uint32) syscall.Errno {
	return syscall.ENOTSUP
}

func (f *fsNode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	const blocks = 1 << 24 // 64 GiB of 4 KiB blocks: room enough for any test
	out.Bsize, out.Frsize = pageSize, pageSize
	out.Blocks, out.Bfree, out.Bavail = blocks, blocks, blocks
	out.Files, out.Ffree = 1<<20, 1<<20
	out.NameLen = 255
	return 0
}
