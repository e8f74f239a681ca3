package policy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/protocol"
)

func call(tool string, params map[string]any) *protocol.Action {
	return &protocol.Action{ID: "a1", Type: protocol.ActionToolCall, Tool: tool, Parameters: params}
}

var noState = StateFunc(func(string) (any, bool) { return nil, false })

func TestRules(t *testing.T) {
	const secret = "sk-ABCDEFGHIJKLMNOPQRSTUVWX"
	cases := []struct {
		name    string
		rule    Rule
		action  *protocol.Action
		state   StateReader
		denied  bool
		contain string
	}{
		{"deny_tool hit", DenyTool{Tool: "shell"}, call("shell", nil), noState, true, "tool 'shell' is denied"},
		{"deny_tool other tool", DenyTool{Tool: "shell"}, call("read", nil), noState, false, ""},
		{"deny_connector hit", DenyConnector{Slug: "files"}, call("mcp_files_write_file", nil), noState, true, "connector 'files' is denied"},
		{"deny_connector other connector", DenyConnector{Slug: "files"}, call("mcp_filesx_read", nil), noState, false, ""},
		{"deny_connector a client's tool", DenyConnector{Slug: "files"}, call("files_read", nil), noState, false, ""},
		{"deny_tool_param contains", DenyToolParam{Tool: "shell", Param: "command", Contains: "rm -rf"}, call("shell", map[string]any{"command": "sudo rm -rf /"}), noState, true, "contains a denied pattern"},
		{"deny_tool_param coerces", DenyToolParam{Tool: "t", Param: "n", Contains: "42"}, call("t", map[string]any{"n": json.Number("1428")}), noState, true, ""},
		{"deny_tool_param absent", DenyToolParam{Tool: "shell", Param: "command", Contains: "rm"}, call("shell", map[string]any{}), noState, false, ""},
		{"deny_tool_param equals", DenyToolParam{Tool: "shell", Param: "command", Equals: "shutdown", HasEquals: true}, call("shell", map[string]any{"command": "shutdown"}), noState, true, "denied value"},
		{"deny_tool_param equals miss", DenyToolParam{Tool: "shell", Param: "command", Equals: "shutdown", HasEquals: true}, call("shell", map[string]any{"command": "shutdown now"}), noState, false, ""},
		{"deny_tool_param presence", DenyToolParam{Tool: "http", Param: "proxy"}, call("http", map[string]any{"proxy": nil}), noState, true, "may not be called with parameter 'proxy'"},
		{"require_state holds", RequireState{Key: "tests_passed", Value: true}, call("deploy", nil), StateFunc(func(string) (any, bool) { return true, true }), false, ""},
		{"require_state differs", RequireState{Key: "tests_passed", Value: true}, call("deploy", nil), StateFunc(func(string) (any, bool) { return "true", true }), true, "state 'tests_passed' must be true"},
		{"require_state missing", RequireState{Key: "tests_passed", Value: true}, call("deploy", nil), noState, true, ""},
		{"deny_keyword nested", DenyKeyword{Keyword: "DROP TABLE"}, call("sql", map[string]any{"q": []any{map[string]any{"s": "x; DROP TABLE users"}}}), noState, true, "parameter 'q' carries a denied keyword"},
		{"deny_keyword clean", DenyKeyword{Keyword: "DROP TABLE"}, call("sql", map[string]any{"q": "select 1"}), noState, false, ""},
		{"allow_tool_param listed", AllowToolParam{Tool: "deploy", Param: "target", Allow: []string{"staging"}}, call("deploy", map[string]any{"target": "staging"}), noState, false, ""},
		{"allow_tool_param unlisted", AllowToolParam{Tool: "deploy", Param: "target", Allow: []string{"staging"}}, call("deploy", map[string]any{"target": "prod"}), noState, true, "not one of the allowed values"},
		{"allow_tool_param absent fails closed", AllowToolParam{Tool: "deploy", Param: "target", Allow: []string{"staging"}}, call("deploy", map[string]any{}), noState, true, "needs parameter 'target'"},
		{"allow_tool_param empty list fails closed", AllowToolParam{Tool: "deploy", Param: "target"}, call("deploy", map[string]any{"target": "staging"}), noState, true, "no value of parameter 'target' is allowed"},
		{"allow_tool_param other tool", AllowToolParam{Tool: "deploy", Param: "target"}, call("read", nil), noState, false, ""},
		{"matching hit, secret kept out", NewDenyToolParamMatching("http", "body", `sk-[A-Za-z0-9]{20,}`), call("http", map[string]any{"body": "key=" + secret}), noState, true, "matches a denied pattern"},
		{"matching miss", NewDenyToolParamMatching("http", "body", `sk-[A-Za-z0-9]{20,}`), call("http", map[string]any{"body": "sk-short"}), noState, false, ""},
		{"matching bad regex denies the tool", NewDenyToolParamMatching("http", "body", `(`), call("http", map[string]any{}), noState, true, "does not compile"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reason, denied := tc.rule.Evaluate(tc.action, tc.state, time.Now())
			if denied != tc.denied || !strings.Contains(reason, tc.contain) {
				t.Fatalf("denied=%v %q, want denied=%v containing %q", denied, reason, tc.denied, tc.contain)
			}
			if strings.Contains(reason, secret) || strings.Contains(reason, "sudo") || strings.Contains(reason, "users") || strings.Contains(reason, "rm -rf") {
				t.Fatalf("the matched value or the operator's pattern leaked into the message: %q", reason)
			}
		})
	}
}

func TestRateLimitSlidingWindow(t *testing.T) {
	r := &RateLimitTool{Tool: "http", MaxCalls: 2, Interval: time.Minute}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := call("http", nil)
	for i, step := range []struct {
		at     time.Duration
		denied bool
	}{
		{0, false}, {10 * time.Second, false}, {20 * time.Second, true}, {30 * time.Second, true},
		{61 * time.Second, false}, // the first admitted call aged out; denied ones took no slot
		{65 * time.Second, true},
		{71 * time.Second, false},
	} {
		if _, denied := r.Evaluate(a, noState, t0.Add(step.at)); denied != step.denied {
			t.Fatalf("call %d at %s: denied=%v, want %v", i, step.at, denied, step.denied)
		}
	}
	zero := &RateLimitTool{Tool: "http", MaxCalls: 0, Interval: time.Minute}
	if _, denied := zero.Evaluate(a, noState, t0); !denied {
		t.Fatal("max_calls 0 must deny every call")
	}
}

func TestEngineCollectsEveryViolationAndRemoves(t *testing.T) {
	e := NewEngine(
		Policy{Name: "no_shell", Rule: DenyTool{Tool: "shell"}},
		Policy{Name: "flag", Rule: RequireState{Key: "flag", Value: true}},
		Policy{Name: "no_rm", Rule: DenyToolParam{Tool: "shell", Param: "command", Contains: "rm"}},
		Policy{Name: "no_read", Rule: DenyTool{Tool: "read"}},
		Policy{Name: "no_shell", Rule: DenyToolParam{Tool: "shell", Param: "cwd"}},
	)
	v := e.Evaluate(call("shell", map[string]any{"command": "rm x", "cwd": "/"}), noState)
	var names []string
	for _, x := range v {
		names = append(names, x.PolicyName)
	}
	if strings.Join(names, ",") != "no_shell,flag,no_rm,no_shell" || v[0].ActionID != "a1" {
		t.Fatalf("want every violation in registration order, got %+v", v)
	}
	if n := e.Remove("no_shell"); n != 2 || e.Len() != 3 {
		t.Fatalf("removed %d, left %d", n, e.Len())
	}
	if n := e.Remove("absent"); n != 0 {
		t.Fatalf("removing an absent name: %d", n)
	}
}

func TestFromDefinition(t *testing.T) {
	bad := []struct {
		def      protocol.PolicyDefinition
		contains string
	}{
		{protocol.PolicyDefinition{Rule: "deny_tool", Target: "x"}, "'name' is required"},
		{protocol.PolicyDefinition{Name: "n", Rule: "deny_tool"}, "needs field 'target'"},
		{protocol.PolicyDefinition{Name: "n", Rule: "deny_connector"}, "needs field 'target'"},
		{protocol.PolicyDefinition{Name: "n", Rule: "deny_tool_param", Target: "t", Key: "k"}, "needs field 'pattern'"},
		{protocol.PolicyDefinition{Name: "n", Rule: "require_state", Key: "k"}, "needs field 'value'"},
		{protocol.PolicyDefinition{Name: "n", Rule: "deny_tool_callback", Target: "t"}, "not supported"},
		{protocol.PolicyDefinition{Name: "n", Rule: "allow_everything"}, "unknown rule 'allow_everything'"},
		{protocol.PolicyDefinition{Name: "n"}, "field 'rule' is required"},
	}
	for _, tc := range bad {
		if _, err := FromDefinition(tc.def); err == nil || !strings.Contains(err.Error(), tc.contains) {
			t.Errorf("%+v: want %q, got %v", tc.def, tc.contains, err)
		}
	}
	dc, err := FromDefinition(protocol.PolicyDefinition{Name: "no_files", Rule: "deny_connector", Target: "files"})
	if err != nil || dc.Rule != (DenyConnector{Slug: "files"}) {
		t.Fatalf("deny_connector: %+v %v", dc, err)
	}
	p, err := FromDefinition(protocol.PolicyDefinition{Name: "gate", Rule: "require_state", Key: "ok", Value: true})
	if err != nil || p.Description != "require state 'ok' to be true" {
		t.Fatalf("%+v %v", p, err)
	}
}

func writeFile(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestLoadDir(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "20-net.toml", `
[[deny_tool_param]]
tool = "http_request"
param = "url"
contains = "169.254.169.254"

[[deny_tool_param]]
tool = "shell"
param = "retries"
equals = 3

[[allow_tool_param]]
tool = "deploy"
param = "target"
allow = ["staging"]

[[deny_tool_param_matching]]
tool = "http_request"
param = "body"
matches = "sk-[A-Za-z0-9]{20,}"

[[rate_limit_tool]]
tool = "http_request"
max_calls = 10
interval_secs = 60.0
`)
	writeFile(t, dir, "10-base.toml", `deny_tool = ["rm"]
deny_connector = ["tracker"]
deny_keyword = ["DROP TABLE"]
`)
	writeFile(t, dir, "notes.txt", "not a policy file")
	e, files, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range e.List() {
		names = append(names, p.Name)
	}
	want := "deny_tool:rm,deny_connector:tracker,deny_keyword:DROP TABLE,deny_tool_param:http_request.url,deny_tool_param:shell.retries,allow_tool_param:deploy.target,deny_tool_param_matching:http_request.body,rate_limit_tool:http_request"
	if files != 2 || strings.Join(names, ",") != want {
		t.Fatalf("%d files, rules\n %s\nwant\n %s", files, strings.Join(names, ","), want)
	}
	// An integer from TOML equals the same JSON number.
	if v := e.Evaluate(call("shell", map[string]any{"retries": json.Number("3")}), noState); len(v) != 1 {
		t.Fatalf("equals = 3 did not match 3: %+v", v)
	}
	if _, _, err := LoadDir(filepath.Join(dir, "missing")); err != nil {
		t.Fatalf("a missing directory is an empty rule set: %v", err)
	}
}

func TestLoadFileRefusesMalformed(t *testing.T) {
	cases := []struct {
		body, contains string
	}{
		{`deny_tool = "rm"`, "deny_tool"},
		{`deny_tools = ["rm"]`, "unknown key deny_tools"},
		{"[[trace_rule]]\nname = \"x\"\n", "trace_rule is not enforced"},
		{"[[deny_tool_param]]\ntool = \"x\"\n", "deny_tool_param[0] needs tool and param"},
		{"[[deny_tool_param]]\ntool = \"x\"\nparam = \"y\"\nwhatever = 1\n", "unknown key deny_tool_param.whatever"},
		{"[[rate_limit_tool]]\ntool = \"x\"\nmax_calls = 1\n", "needs tool, max_calls and interval_secs"},
		{"[[rate_limit_tool]]\ntool = \"x\"\nmax_calls = -1\ninterval_secs = 1.0\n", "rate_limit_tool[0] (tool 'x'): max_calls must be 0 to 1000000, got -1"},
		{"[[rate_limit_tool]]\ntool = \"x\"\nmax_calls = 2000000\ninterval_secs = 1.0\n", "max_calls must be 0 to 1000000"},
		{"[[rate_limit_tool]]\ntool = \"x\"\nmax_calls = 1\ninterval_secs = 1e-10\n", "rate_limit_tool[0] (tool 'x'): interval_secs must be a finite number of seconds, at least 0.001 (a shorter interval never limits), got 1e-10"},
		{"[[rate_limit_tool]]\ntool = \"x\"\nmax_calls = 1\ninterval_secs = nan\n", "interval_secs must be"},
		{"[[rate_limit_tool]]\ntool = \"x\"\nmax_calls = 1\ninterval_secs = inf\n", "interval_secs must be"},
		{"deny_tool_param = [{tool = \"x\", param = \"y\", equals = " + strings.Repeat("[", 40) + strings.Repeat("]", 40) + "}]", "nest 42 levels deep; at most 32 are accepted"},
		{"deny_keyword = [\"\"]", "would match every action"},
		{"this is = not toml ]", "policy file"},
	}
	for i, tc := range cases {
		dir := t.TempDir()
		writeFile(t, dir, "bad.toml", tc.body)
		_, _, err := LoadDir(dir)
		if err == nil || !strings.Contains(err.Error(), tc.contains) || !strings.Contains(err.Error(), "bad.toml") {
			t.Errorf("case %d: want an error naming bad.toml and %q, got %v", i, tc.contains, err)
		}
	}
}

// The depth check reads strings and comments as TOML does: brackets in them
// are not nesting.
func TestTOMLDepthIgnoresStringsAndComments(t *testing.T) {
	body := "# [[[[[[\ndeny_keyword = [\"[[[[\", '{{{{', \"\"\"\n[[[[\"\"\", \"a\\\"[[\"]\n"
	if d := tomlDepth([]byte(body)); d != 1 {
		t.Fatalf("depth %d, want 1", d)
	}
	dir := t.TempDir()
	writeFile(t, dir, "ok.toml", body)
	if _, _, err := LoadDir(dir); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkEvaluate1000Rules evaluates one action against 1,000 rules of
// mixed kinds (a quarter each: deny_tool, deny_tool_param, deny_keyword,
// deny_tool_param_matching), none of which deny it. "all-on-tool": every
// tool-scoped rule names the called tool, so all 1,000 run; "spread": the
// rules name 25 tools, as an operator's set would.
func BenchmarkEvaluate1000Rules(b *testing.B) {
	b.Run("all-on-tool", func(b *testing.B) { benchRules(b, func(int) string { return "http" }) })
	b.Run("spread", func(b *testing.B) {
		benchRules(b, func(i int) string {
			return []string{"http", "shell", "deploy", "sql", "mail"}[i%5] + string(rune('a'+i%5))
		})
	})
}

func benchRules(b *testing.B, toolOf func(int) string) {
	var ps []Policy
	for i := 0; i < 1000; i++ {
		tool := toolOf(i)
		switch i % 4 {
		case 0:
			ps = append(ps, Policy{Name: "p", Rule: DenyToolParam{Tool: tool, Param: "url", Equals: "x", HasEquals: true}})
		case 1:
			ps = append(ps, Policy{Name: "p", Rule: DenyToolParam{Tool: tool, Param: "url", Contains: fmt.Sprintf("169.254.%d", i)}})
		case 2:
			ps = append(ps, Policy{Name: "p", Rule: DenyKeyword{Keyword: fmt.Sprintf("DROP %d", i)}})
		case 3:
			ps = append(ps, Policy{Name: "p", Rule: NewDenyToolParamMatching(tool, "body", fmt.Sprintf("sk-%d[0-9]{8}", i))})
		}
	}
	e := NewEngine(ps...)
	a := call("http", map[string]any{"url": "https://example.com/api", "body": "hello world"})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if v := e.Evaluate(a, noState); len(v) != 0 {
			b.Fatal(v)
		}
	}
}

// An interval longer than a Duration holds saturates: the limit stays a limit.
func TestRateLimitWithAHugeIntervalStillLimits(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "limit.toml", `
[[rate_limit_tool]]
tool = "charge"
max_calls = 1
interval_secs = 1e10
`)
	e, _, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if v := e.Evaluate(call("charge", nil), noState); len(v) != 0 {
		t.Fatalf("the first call was denied: %+v", v)
	}
	if v := e.Evaluate(call("charge", nil), noState); len(v) != 1 {
		t.Fatal("interval_secs = 1e10 let a second call through: the limit became none")
	}
}
