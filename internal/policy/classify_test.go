package policy

import (
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		name   string
		action *protocol.Action
		tier   Tier
		rev    protocol.Reversibility
	}{
		// The reference's false positives: none of these is full_access.
		{"url containing http", call("fetch_url", map[string]any{"url": "https://example.com/http/docs"}), ReadOnly, protocol.Reversible},
		{"format_date", call("format_date", map[string]any{"date": "2026-01-01", "format": "send by email"}), SandboxEdit, protocol.Reversible},
		{"search release notes", call("search", map[string]any{"query": "release notes"}), ReadOnly, protocol.Reversible},
		{"message body with send", call("write_file", map[string]any{"path": "/tmp/a", "content": "please send the deploy"}), SandboxEdit, protocol.Reversible},
		// The reference's true positives.
		{"rm -rf", call("run_command", map[string]any{"command": "rm -rf /tmp/build"}), FullAccess, protocol.Reversible},
		{"terraform apply", call("run_command", map[string]any{"args": []any{"terraform", "apply", "-auto-approve"}}), FullAccess, protocol.Reversible},
		{"deploy_service", call("deploy_service", nil), FullAccess, protocol.Compensable},
		{"send_email", call("send_email", map[string]any{"to": "a@b.c"}), FullAccess, protocol.Irreversible},
		{"camel sendEmail", call("sendEmail", nil), FullAccess, protocol.Irreversible},
		{"read_secret", call("read_secret", nil), FullAccess, protocol.Reversible},
		{"db_insert", call("db_insert", map[string]any{"row": map[string]any{"a": 1}}), SandboxEdit, protocol.Compensable},
		{"api_key param", call("call_api", map[string]any{"api_key": "x"}), FullAccess, protocol.Irreversible},
		{"nested auth.token", call("call_api", map[string]any{"auth": map[string]any{"token": "x"}}), FullAccess, protocol.Irreversible},
		{"db_password", call("connect_db", map[string]any{"db_password": "x"}), FullAccess, protocol.Irreversible},
		{"author is not auth", call("list_books", map[string]any{"author": "x"}), ReadOnly, protocol.Reversible},
		{"ssh key path", call("read_file", map[string]any{"path": "~/.ssh/id_rsa"}), FullAccess, protocol.Reversible},
		{"pem path", call("read_file", map[string]any{"file": "/srv/tls/server.pem"}), FullAccess, protocol.Reversible},
		{"aws credentials", call("copy_file", map[string]any{"src": "/home/u/.aws/credentials"}), FullAccess, protocol.Reversible},
		{"plain path", call("read_file", map[string]any{"path": "/home/u/notes.txt"}), ReadOnly, protocol.Reversible},
		{"drop table anywhere", call("query_db", map[string]any{"sql": "SELECT 1; DROP TABLE users"}), FullAccess, protocol.Reversible},
		{"droplet is not drop", call("list_droplets", map[string]any{"q": "droplet tables"}), ReadOnly, protocol.Reversible},
		{"rm only as a command word", call("run_tests", map[string]any{"command": "pytest --rm-cache"}), SandboxEdit, protocol.Reversible},
		{"sudo path", call("run_command", map[string]any{"cmd": "/usr/bin/sudo ls"}), FullAccess, protocol.Reversible},
		{"unknown tool", call("frobnicate", nil), SandboxEdit, protocol.Irreversible},
		// Shapes that once slipped past: arrays, nesting, punctuation, quoting, unclean paths.
		{"credential key in an array", call("call_api", map[string]any{"headers": []any{map[string]any{"api_key": "x"}}}), FullAccess, protocol.Irreversible},
		{"nested command array", call("run_job", map[string]any{"command": []any{[]any{"sudo", "ls"}}}), FullAccess, protocol.Reversible},
		{"command in an object", call("run_job", map[string]any{"command": map[string]any{"line": "curl x"}}), FullAccess, protocol.Reversible},
		{"command key nested", call("run_job", map[string]any{"spec": map[string]any{"cmd": "wget http://x"}}), FullAccess, protocol.Reversible},
		{"path in an array", call("read_file", map[string]any{"path": []any{"~/.ssh/id_rsa"}}), FullAccess, protocol.Reversible},
		{"phrase after a semicolon", call("query_db", map[string]any{"sql": "x;DROP TABLE users"}), FullAccess, protocol.Reversible},
		{"phrase in a substitution", call("note_write", map[string]any{"text": "$(rm -rf /)"}), FullAccess, protocol.Reversible},
		{"quoted command", call("run_job", map[string]any{"command": "r'm' -rf /"}), FullAccess, protocol.Reversible},
		{"doubled slash", call("read_file", map[string]any{"path": "/etc//shadow"}), FullAccess, protocol.Reversible},
		{"dot-dot path", call("read_file", map[string]any{"path": "/tmp/../etc/shadow"}), FullAccess, protocol.Reversible},
		{"bare .ssh", call("list_dir", map[string]any{"dir": "~/.ssh"}), FullAccess, protocol.Reversible},
		{"state_write", &protocol.Action{Type: protocol.ActionStateWrite}, SandboxEdit, protocol.Reversible},
		{"state_read", &protocol.Action{Type: protocol.ActionStateRead}, ReadOnly, protocol.Reversible},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Classify(tc.action)
			if c.Tier != tc.tier || c.Reversibility != tc.rev {
				t.Fatalf("got %s/%s (%v), want %s/%s", c.Tier, c.Reversibility, c.Signals, tc.tier, tc.rev)
			}
			if len(c.Signals) == 0 {
				t.Fatal("no signal recorded")
			}
		})
	}
}

func TestSegments(t *testing.T) {
	for in, want := range map[string]string{
		"deploy_service": "deploy service", "sendEmail": "send email", "HTTPRequest": "http request",
		"fs.read-file": "fs read file", "messaging.send": "messaging send",
	} {
		got := segments(in)
		joined := ""
		for i, s := range got {
			if i > 0 {
				joined += " "
			}
			joined += s
		}
		if joined != want {
			t.Errorf("%s: %q, want %q", in, joined, want)
		}
	}
	// The byte walk for ASCII names splits as the rune walk does.
	for _, in := range []string{"", "_", "a", "A", "aB", "Ab", "ABc", "abC", "a_b-c.d/e f:g", "__x__", "XMLHttpRequest2Go",
		"getURLForID", "a1B2c3", "UPPER", "lower", "Mixed_Case-Thing.Name", "x/Y/z", "noop", "A_B", "aBC", "AbC"} {
		got, want := segments(in), segmentsOfRunes(in)
		if len(got) != len(want) {
			t.Errorf("%q: %q, the rune walk gives %q", in, got, want)
			continue
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%q: %q, the rune walk gives %q", in, got, want)
				break
			}
		}
	}
}
