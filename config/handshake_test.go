package config

import (
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
)

// TestRequireHandshake: on unless turned off, from the environment or a flag.
func TestRequireHandshake(t *testing.T) {
	isolate(t, nil)
	cfg, err := Load(nil, "/home/u", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.RequireHandshake {
		t.Error("require_handshake is off by default; it must be on")
	}
	isolate(t, map[string]string{"CAR_REQUIRE_HANDSHAKE": "false"})
	if cfg, err = Load(nil, "/home/u", io.Discard); err != nil {
		t.Fatal(err)
	}
	if cfg.RequireHandshake {
		t.Error("CAR_REQUIRE_HANDSHAKE=false left it on")
	}
	isolate(t, nil)
	if cfg, err = Load([]string{"--require-handshake=false"}, "/home/u", io.Discard); err != nil {
		t.Fatal(err)
	}
	if cfg.RequireHandshake {
		t.Error("--require-handshake=false left it on")
	}
}

// TestDocumentedSwitchDefaults: docs/operations.md gives every on/off
// setting the default the daemon has.
func TestDocumentedSwitchDefaults(t *testing.T) {
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range settings {
		def, ok := s.def.(bool)
		if !ok {
			continue
		}
		prefix := "| `--" + s.flag() + "` | `" + s.env + "` | "
		found := false
		for l := range strings.Lines(string(doc)) {
			if rest, ok := strings.CutPrefix(l, prefix); ok {
				found = true
				if want := fmt.Sprintf("`%t` |", def); !strings.HasPrefix(rest, want) {
					t.Errorf("docs/operations.md gives --%s the default %q; the daemon's is %t", s.flag(), strings.SplitN(rest, "|", 2)[0], def)
				}
			}
		}
		if !found {
			t.Errorf("docs/operations.md has no row for --%s", s.flag())
		}
	}
}
