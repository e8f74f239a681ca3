package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func openStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.TempDir(), 8, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestListReadsTheHeaderLineAndNoState(t *testing.T) {
	s := openStore(t)
	tenant := "t1"
	cp := &Checkpoint{ID: "c1", Name: "before", Tenant: &tenant, CreatedAt: "2026-01-01T00:00:00Z", State: map[string]map[string]any{"t1": {"a": "x", "b": "y"}}}
	saved, err := s.Save(cp)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(s.Dir(), "c1.json")
	data, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(data, []byte(headerPrefix)) || int64(len(data)) != saved.Bytes {
		t.Fatalf("the file must open with its header line and be %d bytes: %q, %v", saved.Bytes, data, err)
	}
	// Damage the state after the header, keeping the size: a list that
	// read it would report it corrupt.
	nl := bytes.IndexByte(data, '\n')
	damaged := append(append([]byte(nil), data[:nl+1]...), bytes.Repeat([]byte("#"), len(data)-nl-1)...)
	if err := os.WriteFile(path, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	list, err := s.List()
	if err != nil || len(list) != 1 {
		t.Fatalf("list: %+v, %v", list, err)
	}
	if got := list[0]; got.Corrupt != "" || got.Name != "before" || got.Keys != 2 || got.Tenant == nil || *got.Tenant != "t1" || got.Bytes != saved.Bytes || got.CreatedAt != cp.CreatedAt {
		t.Fatalf("listed from the header: %+v; saved %+v", got, saved)
	}
	if _, err := s.Load("c1"); err == nil || !strings.Contains(err.Error(), "corrupt") || !strings.Contains(err.Error(), path) {
		t.Fatalf("a restore reads the state and must refuse it, naming the file: %v", err)
	}
}

func TestAFileWithoutAHeaderIsListedOnceFromItsStateThenFromItsHeader(t *testing.T) {
	s := openStore(t)
	cp := &Checkpoint{ID: "old", Name: "legacy", CreatedAt: "2025-01-01T00:00:00Z", State: map[string]map[string]any{"": {"n": json.Number("7")}}}
	legacy, err := json.Marshal(cp)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(s.Dir(), "old.json")
	if err := os.WriteFile(path, legacy, 0o600); err != nil {
		t.Fatal(err)
	}
	list, err := s.List()
	if err != nil || len(list) != 1 || list[0].Name != "legacy" || list[0].Keys != 1 || list[0].Corrupt != "" {
		t.Fatalf("a file without a header must still list: %+v, %v", list, err)
	}
	upgraded, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(upgraded, []byte(headerPrefix)) || !bytes.HasSuffix(upgraded, legacy) {
		t.Fatalf("the list must have given the file its header, the state kept byte for byte: %q, %v", upgraded, err)
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the rewritten file: %v, %v; want 0600", info, err)
	}
	again, err := s.List()
	if err != nil || len(again) != 1 || again[0].Name != "legacy" || again[0].Bytes != int64(len(upgraded)) {
		t.Fatalf("the second list, from the header: %+v, %v", again, err)
	}
	got, err := s.Load("old")
	if err != nil || got.State[""]["n"] != json.Number("7") {
		t.Fatalf("the upgraded checkpoint loads: %+v, %v", got, err)
	}
}

func TestWhatACrashLeavesIsListedOrIgnoredByName(t *testing.T) {
	s := openStore(t)
	if _, err := s.Save(&Checkpoint{ID: "c1", CreatedAt: "2026-01-01T00:00:00Z", State: map[string]map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	// A save cut short leaves its temp file, never <id>.json: not listed.
	if err := os.WriteFile(filepath.Join(s.Dir(), ".c2.json-123"), []byte(headerPrefix), 0o600); err != nil {
		t.Fatal(err)
	}
	// A file cut inside its header (not something a rename leaves, but a
	// damaged disk may) is listed as corrupt, naming it.
	torn := filepath.Join(s.Dir(), "c3.json")
	if err := os.WriteFile(torn, []byte(headerPrefix+`"checkpoint_id":"c3"`), 0o600); err != nil {
		t.Fatal(err)
	}
	list, err := s.List()
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v, %v", list, err)
	}
	for _, m := range list {
		switch m.ID {
		case "c1":
			if m.Corrupt != "" {
				t.Fatalf("c1: %+v", m)
			}
		case "c3":
			if !strings.Contains(m.Corrupt, torn) || !strings.Contains(m.Corrupt, "header") {
				t.Fatalf("the torn file: %+v", m)
			}
		default:
			t.Fatalf("listed %+v", m)
		}
	}
	if _, err := s.Describe("c9"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("describing a missing checkpoint: %v", err)
	}
}

func TestOperationsBeyondTheBoundWaitTheirTurn(t *testing.T) {
	s := openStore(t)
	var releases []func()
	for range MaxConcurrentOps {
		release, err := s.Acquire(context.Background(), "checkpoint.save")
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, release)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Acquire(ctx, "checkpoint.list"); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "checkpoint.list waited") {
		t.Fatalf("one past the bound must wait, and give up with its context: %v", err)
	}
	releases[0]()
	release, err := s.Acquire(context.Background(), "checkpoint.list")
	if err != nil {
		t.Fatalf("a released slot is taken by the next: %v", err)
	}
	release()
	for _, r := range releases[1:] {
		r()
	}
}

// A name too long for the header line is refused with the sizes that
// matter: the name as the header holds it (JSON escapes a '<' to six
// bytes), never a byte count under the bound it says it passed.
func TestANameTooLongForTheHeaderIsRefusedWithItsEncodedSize(t *testing.T) {
	s := openStore(t)
	for _, name := range []string{strings.Repeat("n", maxHeaderBytes), strings.Repeat("<", maxHeaderBytes/4)} {
		_, err := s.Save(&Checkpoint{ID: "c1", Name: name, CreatedAt: "2026-01-01T00:00:00Z", State: map[string]map[string]any{}})
		if err == nil {
			t.Fatalf("a name of %d bytes was saved", len(name))
		}
		encoded, _ := json.Marshal(name)
		if !strings.Contains(err.Error(), fmt.Sprintf("%d bytes as JSON", len(encoded))) {
			t.Errorf("a name of %d bytes, %d as JSON: %v; want its size as JSON", len(name), len(encoded), err)
		}
	}
}
