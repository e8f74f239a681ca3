package file

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/parslee-ai/car-server/internal/agents"
	"github.com/parslee-ai/car-server/internal/policy"
)

func openPostures(t *testing.T, path string) *agents.Postures {
	t.Helper()
	ps, err := OpenPostures(path)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestPostureWritesAreAtomicAnd0600(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agent-permissions.json")
	ps := openPostures(t, path)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		if _, err := ps.Set(ctx, fmt.Sprint("agent-", i), agents.Deny, nil, false); err != nil {
			t.Fatal(err)
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("the posture file is %v, want 0600", st.Mode().Perm())
	}
	assertOnlyFiles(t, dir, "agent-permissions.json", "agent-permissions.json.lock")
}

func TestAPostureWriteThatFailsLeavesTheOldFileAndPolicy(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agent-permissions.json")
	ps := openPostures(t, path)
	ctx := context.Background()
	if _, err := ps.Set(ctx, "agent-0", agents.Deny, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(dir, 0o700) })
	if f, err := os.CreateTemp(dir, "probe"); err == nil {
		f.Close()
		t.Skip("the directory stays writable (running as root): no failed write to observe")
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ps.Reset(ctx, "agent-0"); err == nil {
		t.Fatal("a write into a read-only directory succeeded")
	}
	after, err := os.ReadFile(path)
	if err != nil || string(after) != string(before) {
		t.Fatalf("a failed write changed the file (%v)", err)
	}
	if m, _ := ps.Resolve("agent-0", policy.ReadOnly); m != agents.Deny {
		t.Fatalf("a failed write changed the policy in force: %s", m)
	}
}

func TestTwoWritersOfOnePostureFileKeepEachOthersChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent-permissions.json")
	// Two holders of the one file, as a daemon and another process would be.
	a, b := openPostures(t, path), openPostures(t, path)
	ctx := context.Background()
	const each = 10
	var wg sync.WaitGroup
	errs := make(chan error, 2*each)
	for w, ps := range []*agents.Postures{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				_, err := ps.Set(ctx, fmt.Sprintf("w%d-%d", w, i), agents.Deny, nil, false)
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := openPostures(t, path).Get(); len(got.Agents) != 2*each {
		t.Fatalf("two writers of %d overrides each left %d in the file: an update was lost", each, len(got.Agents))
	}
}

func TestAGarbledPostureFileIsRefusedWithWhatToDo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent-permissions.json")
	if err := os.WriteFile(path, []byte(`{"default":`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenPostures(path); err == nil || !strings.Contains(err.Error(), "move it aside") {
		t.Fatalf("open a garbled file: %v", err)
	}
}
