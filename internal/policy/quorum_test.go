package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

func TestQuorumRulesLoadAndMatchByPattern(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a.toml", "[[quorum]]\ntool = \"deploy_*\"\napprovers = 2\n\n[[quorum]]\ntool = \"deploy_prod\"\napprovers = 3\n")
	e, _, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for tool, want := range map[string]int{"deploy_staging": 2, "deploy_prod": 3, "build": 0, "": 0, "redeploy_x": 0} {
		if got := e.Quorum(tool); got != want {
			t.Errorf("Quorum(%q) = %d, want %d", tool, got, want)
		}
	}
	if vs := e.Evaluate(&protocol.Action{Type: protocol.ActionToolCall, Tool: "deploy_prod"}, nil); len(vs) != 0 {
		t.Fatalf("a quorum rule denied: %v", vs)
	}

	for _, tc := range []struct{ text, want string }{
		{"[[quorum]]\ntool = \"deploy_*\"\napprovers = 0\n", "approvers must be 1 to 16, got 0"},
		{"[[quorum]]\ntool = \"deploy_*\"\napprovers = 17\n", "approvers must be 1 to 16, got 17"},
		{"[[quorum]]\napprovers = 2\n", "needs tool"},
		{"[[quorum]]\ntool = \"deploy_[\"\napprovers = 2\n", "is not a valid pattern"},
	} {
		write("a.toml", tc.text)
		if _, _, err := LoadDir(dir); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "a.toml") {
			t.Errorf("%q: %v, want an error naming the file and %q", tc.text, err, tc.want)
		}
	}
}
