package policy

import (
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/internal/allocs"
)

func TestClassifyIsLinearInNestingDepth(t *testing.T) {
	a := nestedCommand(4000)
	a.Parameters = map[string]any{"cmd": map[string]any{"args": "rm -rf /", "deeper": a.Parameters}}
	var c Classification
	used := allocs.Bytes(func() { c = Classify(a) })
	if c.Tier != FullAccess {
		t.Fatalf("tier %s, want full_access (rm under cmd)", c.Tier)
	}
	if used > 16<<20 { // about 0.4 MB; 160 MB when each level re-read the levels below
		t.Fatalf("classifying one action nested 4,000 deep allocated %d bytes", used)
	}
}

func TestDeepTOMLIsRefusedBeforeParsing(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "deep.toml", "deny_keyword = "+strings.Repeat("[", 1_000_000)+strings.Repeat("]", 1_000_000)+"\n")
	var err error
	used := allocs.Bytes(func() { _, _, err = LoadDir(dir) })
	if err == nil || !strings.Contains(err.Error(), "deep.toml: arrays and inline tables nest 1000000 levels deep; at most 32 are accepted") {
		t.Fatalf("got %v", err)
	}
	if used > 16<<20 { // the file is 2 MB
		t.Fatalf("refusing a 1,000,000-level file allocated %d bytes", used)
	}
}
