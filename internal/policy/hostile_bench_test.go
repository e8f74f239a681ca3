package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

// nestedCommand is one action whose parameters nest "cmd" n levels deep.
func nestedCommand(n int) *protocol.Action {
	var v any = "ls"
	for i := 0; i < n; i++ {
		v = map[string]any{"cmd": v}
	}
	return &protocol.Action{ID: "deep", Type: protocol.ActionToolCall, Tool: "run", Parameters: v.(map[string]any)}
}

func BenchmarkHostileClassifyDepth4000(b *testing.B) {
	a := nestedCommand(4000)
	for b.Loop() {
		Classify(a)
	}
}

func BenchmarkHostileTOMLDepth100k(b *testing.B) {
	path := filepath.Join(b.TempDir(), "deep.toml")
	body := "deny_keyword = " + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + "\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		_, _ = LoadFile(path)
	}
}
