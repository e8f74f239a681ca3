package powerfs

import (
	"bytes"
	"math/rand"
	"strings"
	"testing"
)

// The rules, on the model alone.

// fixture is a root holding a durable file "f" with durable data "old".
func fixture() (root, f *node) {
	root, f = newDir(0o700), newFile(0o600)
	root.add("f", f)
	f.write([]byte("old"), 0)
	f.sync()
	root.sync()
	return root, f
}

func data(t *testing.T, root *node, name string) (string, bool) {
	t.Helper()
	n, ok := root.entries[name]
	if !ok {
		return "", false
	}
	return string(n.data), true
}

func TestModelAnUnsyncedAppendVanishes(t *testing.T) {
	root, f := fixture()
	f.write([]byte("+new"), 3)
	after, lost := cut(root, LoseAll, nil)
	if got, ok := data(t, after, "f"); !ok || got != "old" || lost.Bytes != 4 {
		t.Fatalf("after the cut %q %v, lost %+v; want \"old\" and 4 bytes lost", got, ok, lost)
	}
	f.sync()
	if got, _ := data(t, cutOnly(root), "f"); got != "old+new" {
		t.Fatalf("a synced append: %q, want \"old+new\"", got)
	}
}

func cutOnly(root *node) *node {
	after, _ := cut(root, LoseAll, nil)
	return after
}

func TestModelANewFileNeedsItsDirectorySynced(t *testing.T) {
	root, _ := fixture()
	g := newFile(0o600)
	root.add("g", g)
	g.write([]byte("data"), 0)
	g.sync()
	if _, ok := data(t, cutOnly(root), "g"); ok {
		t.Fatal("a file whose directory was never synced kept its name")
	}
	root.sync()
	if got, ok := data(t, cutOnly(root), "g"); !ok || got != "data" {
		t.Fatalf("after the directory sync: %q %v", got, ok)
	}
}

func TestModelARenameNeedsItsDirectorySynced(t *testing.T) {
	root, _ := fixture()
	tmp := newFile(0o600)
	root.add("tmp", tmp)
	tmp.write([]byte("new"), 0)
	tmp.sync()
	if e := root.rename("tmp", root, "f", false); e != 0 {
		t.Fatal(e)
	}
	after := cutOnly(root)
	if got, _ := data(t, after, "f"); got != "old" {
		t.Fatalf("a rename without a directory sync: f holds %q, want \"old\"", got)
	}
	if _, ok := after.entries["tmp"]; ok {
		t.Fatal("the temp file's name came back, though its creation was never synced")
	}
	root.sync()
	if got, _ := data(t, cutOnly(root), "f"); got != "new" {
		t.Fatalf("a synced rename: f holds %q, want \"new\"", got)
	}
}

func TestModelAnUnlinkNeedsItsDirectorySynced(t *testing.T) {
	root, _ := fixture()
	if e := root.remove("f", false); e != 0 {
		t.Fatal(e)
	}
	if got, ok := data(t, cutOnly(root), "f"); !ok || got != "old" {
		t.Fatalf("an unsynced unlink: %q %v, want the file back", got, ok)
	}
	root.sync()
	if _, ok := data(t, cutOnly(root), "f"); ok {
		t.Fatal("a synced unlink came back")
	}
}

func TestModelANewDirectoryNeedsItsParentSynced(t *testing.T) {
	root, _ := fixture()
	d := newDir(0o700)
	root.add("d", d)
	g := newFile(0o600)
	d.add("g", g)
	g.write([]byte("x"), 0)
	g.sync()
	d.sync()
	if _, ok := cutOnly(root).entries["d"]; ok {
		t.Fatal("a directory whose parent was never synced survived")
	}
	root.sync()
	if got, ok := data(t, cutOnly(root).entries["d"], "g"); !ok || got != "x" {
		t.Fatalf("after the parent's sync: %q %v", got, ok)
	}
}

func TestModelTearLastKeepsAPrefixInOrder(t *testing.T) {
	root, f := fixture()
	f.write([]byte("abc"), 3)
	f.write([]byte("def"), 6)
	prefixes := map[string]bool{}
	for seed := range int64(200) {
		got, _ := data(t, func() *node { a, _ := cut(root, TearLast, rand.New(rand.NewSource(seed))); return a }(), "f")
		if !strings.HasPrefix("oldabcdef", got) || len(got) < 3 {
			t.Fatalf("seed %d: %q is not a prefix of the writes in order", seed, got)
		}
		prefixes[got] = true
	}
	if len(prefixes) != 7 {
		t.Fatalf("200 cuts kept %d of the 7 possible prefixes: %v", len(prefixes), prefixes)
	}
}

// KeepSomePages can keep a later page of an unsynced write without an
// earlier one; what lies between reads as zero bytes. Every byte after the
// cut is the durable one, the written one, or a zero.
func TestModelKeepSomePagesLeavesHoles(t *testing.T) {
	root, f := fixture()
	write := bytes.Repeat([]byte("x"), 3*pageSize)
	f.write(write, 3)
	holes := 0
	for seed := range int64(100) {
		after, _ := cut(root, KeepSomePages, rand.New(rand.NewSource(seed)))
		got := []byte(after.entries["f"].data)
		if !bytes.HasPrefix(got, []byte("old")) {
			t.Fatalf("seed %d: the durable bytes changed: %q", seed, got[:3])
		}
		for i, b := range got[3:] {
			if b != 'x' && b != 0 {
				t.Fatalf("seed %d: byte %d is %q, neither written nor zero", seed, i+3, b)
			}
		}
		if len(got) > pageSize && got[pageSize-1] == 0 {
			holes++ // the first page lost, a later one kept
		}
	}
	if holes == 0 {
		t.Fatal("100 cuts never kept a later page without the first")
	}
}

// A changed directory entry is kept or lost as a whole, and a node reached
// by two names after the cut is one node.
func TestModelKeepSomePagesKeepsOrLosesEachEntry(t *testing.T) {
	root, _ := fixture()
	d := newDir(0o700)
	root.add("d", d)
	root.sync()
	if e := root.rename("f", d, "f", false); e != 0 {
		t.Fatal(e)
	}
	shapes := map[string]bool{}
	for seed := range int64(100) {
		after, _ := cut(root, KeepSomePages, rand.New(rand.NewSource(seed)))
		_, inRoot := after.entries["f"]
		moved, inD := after.entries["d"].entries["f"]
		if inRoot && inD && after.entries["f"] != moved {
			t.Fatalf("seed %d: the file kept under both names is two files", seed)
		}
		shapes[map[bool]string{true: "root", false: "-"}[inRoot]+map[bool]string{true: "d", false: "-"}[inD]] = true
	}
	if len(shapes) != 4 {
		t.Fatalf("100 cuts left %d of the 4 shapes of an unsynced rename across directories: %v", len(shapes), shapes)
	}
}
