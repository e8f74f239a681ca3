package connectors

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/internal/testwait"
)

func writeTOML(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "connectors.toml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	headers := filepath.Join(dir, "tracker.headers")
	if err := os.WriteFile(headers, []byte("# the tracker's key\nAuthorization: Bearer abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "connectors.toml")
	body := `
[[connector]]
name = "Files"
command = "node"
args = ["server.js", "/tmp"]
env = { A = "b" }
enable = ["read_file"]
classify = { write_file = "sandbox_edit" }

[[connector]]
name = "tracker"
url = "http://127.0.0.1:7/mcp"
headers_file = "tracker.headers"
`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	specs, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2 || !specs[0].FromFile || specs[0].Command != "node" || specs[0].Env["A"] != "b" || specs[0].Classify["write_file"] != policy.SandboxEdit {
		t.Fatalf("%+v", specs)
	}
	if specs[1].Headers["Authorization"] != "Bearer abc" {
		t.Fatalf("headers %v", specs[1].Headers)
	}
	if err := os.Chmod(headers, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a headers file others may read: %v", err)
	}
	if specs, err := LoadFile(filepath.Join(dir, "absent.toml")); err != nil || specs != nil {
		t.Fatalf("a missing file: %v %v", specs, err)
	}
}

// Every malformed file is refused naming the file and the line.
func TestLoadFileRefusesMalformed(t *testing.T) {
	cases := []struct{ body, want string }{
		{"[[connector]\nname = \"x\"\n", "line 2: expected end of table array"},
		{"[[connector]]\nname = \"x\"\ncommand = \"a\"\nbogus = 1\n", "line 4: unknown key connector.bogus"},
		{"[[connector]]\nname = \"x\"\n", "line 1: [[connector]] 1: give url"},
		{"[[connector]]\nname = \"x\"\ncommand = \"a\"\n\n[[connector]]\nname = \"X!\"\ncommand = \"b\"\n", "line 5: [[connector]] 2: slug 'x_'"},
		{"[[connector]]\nname = \"a\"\ncommand = \"a\"\n\n[[connector]]\nname = \"a\"\ncommand = \"b\"\n", "line 5: [[connector]] 2: slug 'a' is also"},
		{"[[connector]]\nname = \"x\"\ncommand = \"a\"\nurl = \"http://h/mcp\"\n", "not both"},
		{"[[connector]]\nname = \"x\"\nurl = \"ftp://h/mcp\"\n", "not http"},
		{"[[connector]]\nname = \"!!\"\ncommand = \"a\"\n", "needs a letter or digit"},
		{"[[connector]]\nname = \"x\"\ncommand = \"a\"\nenable = [\"bad.name\"]\n", "outside [A-Za-z0-9_-]"},
		{"[[connector]]\nname = \"x\"\ncommand = \"a\"\nclassify = { t = \"godlike\" }\n", "unknown tier 'godlike'"},
	}
	for _, tc := range cases {
		path := writeTOML(t, tc.body)
		_, err := LoadFile(path)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: want %q naming the file, got %v", tc.body, tc.want, err)
		}
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{"GitHub Tools!": "github_tools_", "files": "files", "a--b__c": "a_b_c", "Ünïcode x": "_n_code_x"} {
		if got := Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
	if !ambiguous("git", "git_hub") || ambiguous("git", "github") || ambiguous("a", "a") {
		t.Fatal("ambiguous")
	}
}

// Reload starts what the file adds, stops what it drops, restarts what it
// changes with its enabled tools kept, and a malformed file changes
// nothing.
func TestReload(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Options{})
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(FilePath(h.home), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	decl := func(name, mode string) string {
		return "[[connector]]\nname = \"" + name + "\"\ncommand = \"" + exe + "\"\nenv = { " + serverModeEnv + " = \"" + mode + "\" }\n\n"
	}
	slugs := func() string {
		var out []string
		for _, c := range h.m.List().Connectors {
			out = append(out, c.Slug)
		}
		return strings.Join(out, ",")
	}
	write(decl("one", "ok") + decl("two", "ok"))
	if err := h.m.Start(); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 30*time.Second, "both connected", func() bool {
		for _, c := range h.m.List().Connectors {
			if !c.Connected {
				return false
			}
		}
		return len(h.m.List().Connectors) == 2
	})
	if _, err := h.m.Enable("one", []string{"call"}); err != nil {
		t.Fatal(err)
	}
	// one changes (another env), two goes, three comes.
	write(decl("one", "badnames") + decl("three", "ok"))
	if err := h.m.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := slugs(); got != "one,three" {
		t.Fatalf("after the reload: %s", got)
	}
	testwait.Eventually(t, 30*time.Second, "one reconnected with its enabled tool", func() bool {
		_, ok := h.s.Tools.Lookup(Canonical("one", "good"))
		views, _ := h.m.Tools("one")
		return !ok && len(views) == 3
	})
	if got := h.m.opts.Tools.List(); len(got) != 0 {
		t.Fatalf("tools published after the change: %+v", got)
	}
	if names := h.m.conns["one"].enabledNames(); len(names) != 1 || names[0] != "call" {
		t.Fatalf("the enabled choice was lost: %v", names)
	}
	write("[[connector]]\nname = \"broken\"\n")
	if err := h.m.Reload(); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("a malformed file: %v", err)
	}
	if got := slugs(); got != "one,three" {
		t.Fatalf("a malformed file changed the connectors: %s", got)
	}
}
