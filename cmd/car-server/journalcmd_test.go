package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func runBinary(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, err := execBinary(args...).CombinedOutput()
	return string(out), exitCode(t, err)
}

func execBinary(args ...string) *exec.Cmd { return exec.Command(binary, args...) }

// exitCode is the process's exit code; any other error fails the test.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0
}

func TestJournalCommands(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "idempotency.jsonl")
	good := `{"op":"put","key":"a","output":1}` + "\n" + `{"op":"put","key":"a","output":2}` + "\n" + `{"op":"put","key":"b","output":3}` + "\n"
	if err := os.WriteFile(path, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := runBinary(t, "journal", "verify", path); code != 0 || !strings.Contains(out, "ok: 3 records, 2 live, 1 dead") {
		t.Fatalf("verify good: %d %s", code, out)
	}
	if err := os.WriteFile(path, []byte(good+`{"op":"pu`), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := runBinary(t, "journal", "verify", path); code != 0 || !strings.Contains(out, "torn") {
		t.Fatalf("verify torn: %d %s", code, out)
	}
	if data, err := os.ReadFile(path); err != nil || !strings.HasSuffix(string(data), `{"op":"pu`) {
		t.Fatalf("verify modified the file: %v", err)
	}
	if out, code := runBinary(t, "journal", "compact", path); code != 0 || !strings.Contains(out, "3 records -> 2 (2 live)") {
		t.Fatalf("compact: %d %s", code, out)
	}
	if out, code := runBinary(t, "journal", "verify", path); code != 0 || !strings.Contains(out, "ok: 2 records, 2 live, 0 dead") {
		t.Fatalf("verify after compact: %d %s", code, out)
	}
	if err := os.WriteFile(path, []byte(good+"garbage\n"+good), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := runBinary(t, "journal", "verify", path); code != 1 || !strings.Contains(out, "line 4") || !strings.Contains(out, path) {
		t.Fatalf("verify corrupt: %d %s", code, out)
	}
	if out, code := runBinary(t, "journal", "frobnicate", path); code != 2 || !strings.Contains(out, "usage") {
		t.Fatalf("usage: %d %s", code, out)
	}
}

func TestJournalCompactRefusesWhileDaemonRuns(t *testing.T) {
	home := t.TempDir()
	startDaemon(t, home)
	out, code := runBinary(t, "journal", "compact", filepath.Join(home, "idempotency.jsonl"))
	if code != 1 || !strings.Contains(out, "stop it before compacting") {
		t.Fatalf("%d %s", code, out)
	}
}

func TestCorruptJournalRefusesStart(t *testing.T) {
	home := t.TempDir()
	path := filepath.Join(home, "idempotency.jsonl")
	if err := os.WriteFile(path, []byte("{\"op\":\"put\",\"key\":\"a\"}\nnot json\n{\"op\":\"put\",\"key\":\"b\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := runBinary(t, "--home", home, "--port", "0")
	if code != 1 || !strings.Contains(out, path+" line 2") {
		t.Fatalf("start on a corrupt journal: %d %s", code, out)
	}
}
