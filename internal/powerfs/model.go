package powerfs

import (
	"math/rand"
	"slices"
	"sort"
	"syscall"
)

// pageSize is the unit a disk writes back on its own: KeepSomePages keeps
// or loses each page written since the last fsync as a whole.
const pageSize = 4096

// Loss is what a power cut keeps of what was never made durable.
type Loss int

const (
	// LoseAll keeps nothing that was not made durable: the strictest
	// reading of the rules.
	LoseAll Loss = iota
	// TearLast keeps each file's unsynced writes in order up to a random
	// byte, as a disk that writes back in order and stops mid-write.
	// Directory entries are kept only when durable.
	TearLast
	// KeepSomePages keeps each page written since its file's last fsync,
	// and each entry changed since its directory's last fsync, or loses
	// it, at random: a disk that writes back in any order. A later page
	// can survive without an earlier one; what lies between reads as zero
	// bytes.
	KeepSomePages
)

// String names the loss in test logs.
func (l Loss) String() string {
	switch l {
	case LoseAll:
		return "lose-all"
	case TearLast:
		return "tear-last"
	case KeepSomePages:
		return "keep-some-pages"
	}
	return "unknown"
}

// node is a file or a directory of the model: what reads see, and what a
// power cut would keep.
type node struct {
	dir  bool
	perm uint32

	// A file: data is what reads see, synced what its last fsync made
	// durable, writes the changes since, in order (for TearLast).
	data   []byte
	synced []byte
	writes []change

	// A directory: entries is what lookups see, durable what its last
	// fsync made durable.
	entries map[string]*node
	durable map[string]*node
}

// change is one write to a file, or a truncation when data is nil.
type change struct {
	off  int64
	data []byte
	size int64 // a truncation's new size
}

func newFile(perm uint32) *node { return &node{perm: perm} }

func newDir(perm uint32) *node {
	return &node{dir: true, perm: perm, entries: map[string]*node{}, durable: map[string]*node{}}
}

// write writes p at off, zero bytes filling any gap past the end.
func (n *node) write(p []byte, off int64) {
	if end := off + int64(len(p)); end > int64(len(n.data)) {
		n.data = append(n.data, make([]byte, end-int64(len(n.data)))...)
	}
	copy(n.data[off:], p)
	n.writes = append(n.writes, change{off: off, data: slices.Clone(p)})
}

// truncate sets the file's size, zero bytes filling any growth.
func (n *node) truncate(size int64) {
	if size <= int64(len(n.data)) {
		n.data = n.data[:size:size]
	} else {
		n.data = append(n.data, make([]byte, size-int64(len(n.data)))...)
	}
	n.writes = append(n.writes, change{size: size})
}

// sync is an fsync: of a file, its data; of a directory, its entries.
func (n *node) sync() {
	if n.dir {
		n.durable = cloneEntries(n.entries)
		return
	}
	n.synced = slices.Clone(n.data)
	n.writes = nil
}

func cloneEntries(m map[string]*node) map[string]*node {
	c := make(map[string]*node, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// add puts a new node under name in directory n; EEXIST when taken.
func (n *node) add(name string, child *node) syscall.Errno {
	if _, ok := n.entries[name]; ok {
		return syscall.EEXIST
	}
	n.entries[name] = child
	return 0
}

// remove takes name out of directory n: a directory only when dir is true
// (and then only an empty one), a file only when it is false.
func (n *node) remove(name string, dir bool) syscall.Errno {
	c, ok := n.entries[name]
	switch {
	case !ok:
		return syscall.ENOENT
	case c.dir && !dir:
		return syscall.EISDIR
	case !c.dir && dir:
		return syscall.ENOTDIR
	case c.dir && len(c.entries) > 0:
		return syscall.ENOTEMPTY
	}
	delete(n.entries, name)
	return 0
}

// rename moves name in directory n to newName in directory to, replacing
// what is there (unless noReplace) as rename(2) does.
func (n *node) rename(name string, to *node, newName string, noReplace bool) syscall.Errno {
	c, ok := n.entries[name]
	if !ok {
		return syscall.ENOENT
	}
	if old, ok := to.entries[newName]; ok {
		switch {
		case old == c:
			return 0
		case noReplace:
			return syscall.EEXIST
		case old.dir && !c.dir:
			return syscall.EISDIR
		case !old.dir && c.dir:
			return syscall.ENOTDIR
		case old.dir && len(old.entries) > 0:
			return syscall.ENOTEMPTY
		}
	}
	delete(n.entries, name)
	to.entries[newName] = c
	return 0
}

// Lost counts what a cut discarded.
type Lost struct {
	Bytes   int // bytes written but not kept (a truncation's lost bytes not counted)
	Entries int // directory entries created, renamed or removed but not kept as they were
}

// cut is the tree a power loss leaves of the tree at root: every node in
// it durable, and what was not, kept or lost as loss says.
func cut(root *node, loss Loss, rng *rand.Rand) (*node, Lost) {
	c := cutter{loss: loss, rng: rng, done: map[*node]*node{}}
	return c.node(root), c.lost
}

type cutter struct {
	loss    Loss
	rng     *rand.Rand
	done    map[*node]*node   // a node reached by two names is one node after the cut
	choices map[entryKey]bool // whether a changed entry was kept
	lost    Lost
}

func (c *cutter) node(n *node) *node {
	if m, ok := c.done[n]; ok {
		return m
	}
	if n.dir {
		m := newDir(n.perm)
		c.done[n] = m
		for _, name := range c.entries(n) {
			m.entries[name] = c.node(c.entry(n, name))
		}
		m.durable = cloneEntries(m.entries)
		return m
	}
	m := newFile(n.perm)
	c.done[n] = m
	m.data = c.file(n)
	m.synced = slices.Clone(m.data)
	return m
}

// entries are the names directory n holds after the cut, sorted so that a
// seed replays the same cut.
func (c *cutter) entries(n *node) []string {
	var names []string
	seen := map[string]bool{}
	for _, m := range []map[string]*node{n.durable, n.entries} {
		for name := range m {
			if !seen[name] {
				seen[name] = true
				names = append(names, name)
			}
		}
	}
	sort.Strings(names)
	var kept []string
	for _, name := range names {
		if c.entry(n, name) != nil {
			kept = append(kept, name)
		}
	}
	return kept
}

// entry is what name in directory n refers to after the cut, nil for
// nothing; the choice is made once per name.
func (c *cutter) entry(n *node, name string) *node {
	cur, dur := n.entries[name], n.durable[name]
	if cur == dur {
		return dur
	}
	key := entryKey{n, name}
	if c.choices == nil {
		c.choices = map[entryKey]bool{}
	}
	keep, ok := c.choices[key]
	if !ok {
		keep = c.loss == KeepSomePages && c.rng.Intn(2) == 0
		c.choices[key] = keep
		if !keep {
			c.lost.Entries++
		}
	}
	if keep {
		return cur
	}
	return dur
}

type entryKey struct {
	dir  *node
	name string
}

// file is the data of file n after the cut.
func (c *cutter) file(n *node) []byte {
	out := slices.Clone(n.synced)
	if len(n.writes) == 0 {
		return out
	}
	written := 0
	for _, w := range n.writes {
		written += len(w.data)
	}
	kept := 0
	switch c.loss {
	case TearLast:
		// In order, up to a random byte of the unsynced writes.
		stop := c.rng.Intn(written + 1)
		for _, w := range n.writes {
			if w.data == nil {
				out = resize(out, w.size)
				continue
			}
			take := min(len(w.data), stop-kept)
			if take <= 0 {
				break // nothing after the stop reached the disk
			}
			out = writeAt(out, w.data[:take], w.off)
			kept += take
			if take < len(w.data) {
				break
			}
		}
	case KeepSomePages:
		truncated := len(n.data) < len(out)
		if truncated && c.rng.Intn(2) == 0 {
			out = out[:len(n.data)]
		}
		for _, p := range dirtyPages(n.writes) {
			start := p * pageSize
			if start >= int64(len(n.data)) || c.rng.Intn(2) == 0 {
				continue
			}
			page := n.data[start:min(start+pageSize, int64(len(n.data)))]
			out = writeAt(out, page, start)
			kept += len(page)
		}
		kept = min(kept, written)
	}
	c.lost.Bytes += written - kept
	return out
}

// dirtyPages are the pages the writes touched, in order.
func dirtyPages(writes []change) []int64 {
	seen := map[int64]bool{}
	var pages []int64
	for _, w := range writes {
		if len(w.data) == 0 {
			continue
		}
		for p := w.off / pageSize; p <= (w.off+int64(len(w.data))-1)/pageSize; p++ {
			if !seen[p] {
				seen[p] = true
				pages = append(pages, p)
			}
		}
	}
	slices.Sort(pages)
	return pages
}

func writeAt(b, p []byte, off int64) []byte {
	if end := off + int64(len(p)); end > int64(len(b)) {
		b = resize(b, end)
	}
	copy(b[off:], p)
	return b
}

func resize(b []byte, size int64) []byte {
	if size <= int64(len(b)) {
		return b[:size:size]
	}
	return append(b, make([]byte, size-int64(len(b)))...)
}
