package connectors

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/internal/policy"
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
