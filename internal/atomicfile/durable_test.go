package atomicfile

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// watchSyncs records the directories synced until the test ends, calling
// also before each sync.
func watchSyncs(t *testing.T, also func(dir string)) *[]string {
	t.Helper()
	var mu sync.Mutex
	var synced []string
	prev := syncDir
	syncDir = func(dir string) error {
		if also != nil {
			also(dir)
		}
		mu.Lock()
		synced = append(synced, dir)
		mu.Unlock()
		return prev(dir)
	}
	t.Cleanup(func() { syncDir = prev })
	return &synced
}

func TestMkdirAllSyncsTheParentOfEachDirectoryItCreates(t *testing.T) {
	root := t.TempDir()
	synced := watchSyncs(t, nil)
	if err := MkdirAll(filepath.Join(root, "a", "b", "c")); err != nil {
		t.Fatal(err)
	}
	want := []string{root, filepath.Join(root, "a"), filepath.Join(root, "a", "b")}
	if !slices.Equal(*synced, want) {
		t.Fatalf("synced %q, want %q", *synced, want)
	}
	for _, d := range want[1:] {
		if st, err := os.Stat(d); err != nil || st.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v %v, want a 0700 directory", d, st, err)
		}
	}
	*synced = nil
	if err := MkdirAll(filepath.Join(root, "a", "b", "c")); err != nil {
		t.Fatal(err)
	}
	if len(*synced) != 0 {
		t.Fatalf("an existing directory synced %q", *synced)
	}
}

func TestMkdirAllUnderAFileFails(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAll(filepath.Join(file, "child")); err == nil {
		t.Fatal("a directory under a regular file was created")
	}
}

func TestOpenDurableSyncsTheDirectoryOnEveryOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new")
	path := filepath.Join(dir, "j.jsonl")
	synced := watchSyncs(t, func(d string) {
		if d == dir {
			if _, err := os.Lstat(path); err != nil {
				t.Errorf("the directory was synced before the file was in it: %v", err)
			}
		}
	})
	for i := range 2 {
		f, err := OpenDurable(path, os.O_RDWR, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if got := slices.Index(*synced, dir); got < 0 {
			t.Fatalf("open %d: synced %q, never %s", i, *synced, dir)
		}
		if i == 0 && !slices.Contains(*synced, filepath.Dir(dir)) {
			t.Fatalf("the new directory's parent was not synced: %q", *synced)
		}
		*synced = nil
	}
}

func TestWriteSyncsTheDirectoryAfterTheRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	var seen []string
	watchSyncs(t, func(d string) {
		if d == dir {
			b, _ := os.ReadFile(path)
			seen = append(seen, string(b))
		}
	})
	if err := Write(path, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seen, []string{"new"}) {
		t.Fatalf("the directory syncs saw the file hold %q, want one sync after the rename (\"new\")", seen)
	}
}
