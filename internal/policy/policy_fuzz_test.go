package policy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

// FuzzLoadFile: any operator file loads or gives an error naming the file.
func FuzzLoadFile(f *testing.F) {
	for _, s := range []string{
		`deny_tool = ["rm"]`,
		"[[rate_limit_tool]]\ntool = \"x\"\nmax_calls = 1\ninterval_secs = 1e10\n",
		"[[rate_limit_tool]]\ntool = \"x\"\nmax_calls = 1\ninterval_secs = 1e-10\n",
		"[[deny_tool_param]]\ntool = \"x\"\nparam = \"y\"\nequals = {a = [1, 2]}\n",
		"[[deny_tool_param_matching]]\ntool = \"x\"\nparam = \"y\"\nmatches = \"^a+$\"\n",
		"deny_keyword = [\"[[\", '{{', \"\"\"\n]]\"\"\"]\n# [[[\n",
		"this is = not toml ]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		path := filepath.Join(t.TempDir(), "p.toml")
		if err := os.WriteFile(path, body, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadFile(path); err != nil && !strings.Contains(err.Error(), path) {
			t.Fatalf("error does not name the file: %v", err)
		}
	})
}

// FuzzClassify: the tier never drops when a parameter is added or when the
// parameters are nested under another key.
func FuzzClassify(f *testing.F) {
	for _, s := range [][3]string{
		{"read_file", `{"path":"/tmp/x"}`, `{"cmd":"rm -rf /"}`},
		{"shell", `{"command":"ls"}`, `{"api_key":"x"}`},
		{"list", `{}`, `{"path":"~/.ssh/id_rsa"}`},
		{"deploy", `{"args":["terraform","apply"]}`, `{"x":[{"password":1}]}`},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, tool, params, extra string) {
		var p, e map[string]any
		if json.Unmarshal([]byte(params), &p) != nil || json.Unmarshal([]byte(extra), &e) != nil || p == nil {
			return
		}
		a := &protocol.Action{Type: protocol.ActionToolCall, Tool: tool, Parameters: p}
		base := Classify(a).Tier
		added := map[string]any{}
		for k, v := range p {
			added[k] = v
		}
		for k, v := range e {
			if _, clash := added[k]; !clash {
				added[k] = v
			}
		}
		if got := Classify(&protocol.Action{Type: protocol.ActionToolCall, Tool: tool, Parameters: added}).Tier; got < base {
			t.Fatalf("adding %s to %s dropped the tier from %s to %s", extra, params, base, got)
		}
		nested := map[string]any{"wrapped": p}
		if got := Classify(&protocol.Action{Type: protocol.ActionToolCall, Tool: tool, Parameters: nested}).Tier; got < base {
			t.Fatalf("nesting %s dropped the tier from %s to %s", params, base, got)
		}
	})
}
