package checkpoint

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSaveLoadListDelete(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "checkpoints"), 2, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	cp := &Checkpoint{ID: "c1", Name: "before", CreatedAt: "2026-01-01T00:00:00Z", State: map[string]map[string]any{"": {"n": json.Number("7")}, "t1": {"x": "y"}}}
	meta, err := s.Save(cp)
	if err != nil {
		t.Fatal(err)
	}
	if meta.Keys != 2 || meta.Bytes == 0 {
		t.Fatalf("meta = %+v", meta)
	}
	info, err := os.Stat(filepath.Join(s.Dir(), "c1.json"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("checkpoint file mode = %v, %v; want 0600", info.Mode(), err)
	}
	got, err := s.Load("c1")
	if err != nil {
		t.Fatal(err)
	}
	if got.State[""]["n"] != json.Number("7") || got.State["t1"]["x"] != "y" {
		t.Fatalf("loaded state = %v", got.State)
	}
	if _, err := s.Save(&Checkpoint{ID: "c2", CreatedAt: "2026-01-02T00:00:00Z", State: map[string]map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Save(&Checkpoint{ID: "c3", State: map[string]map[string]any{}}); err == nil || !strings.Contains(err.Error(), "max_checkpoints") {
		t.Fatalf("a third checkpoint past max_checkpoints 2: %v", err)
	}
	if err := s.Delete("c2"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("c2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleting twice: %v", err)
	}
	if _, err := s.Load("../c1"); err == nil || !strings.Contains(err.Error(), "not one this daemon issues") {
		t.Fatalf("a path in an id must be refused: %v", err)
	}
}

func TestCorruptAndOversizedFilesAreRefusedByName(t *testing.T) {
	s, err := Open(t.TempDir(), 8, 256)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(s.Dir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"checkpoint_id": "bad", "state": {`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load("bad"); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("corrupt file: %v", err)
	}
	list, err := s.List()
	if err != nil || len(list) != 1 || !strings.Contains(list[0].Corrupt, bad) {
		t.Fatalf("list must show the corrupt file: %+v, %v", list, err)
	}
	big := &Checkpoint{ID: "big", State: map[string]map[string]any{"": {"k": strings.Repeat("x", 300)}}}
	if _, err := s.Save(big); err == nil || !strings.Contains(err.Error(), "max_checkpoint_bytes") {
		t.Fatalf("an oversized checkpoint: %v", err)
	}
}
