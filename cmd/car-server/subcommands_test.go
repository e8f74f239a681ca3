package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sourcegraph/jsonrpc2"
)

// Every command answers --help, -h and car-server help NAME with its own
// usage on stdout and exit 0, and a flag it does not know with its usage and
// exit 2.
func TestEveryCommandHasItsOwnHelp(t *testing.T) {
	for name, sc := range subcommands {
		firstLine := strings.SplitN(sc.usage, "\n", 2)[0]
		for _, args := range [][]string{{name, "--help"}, {name, "-h"}, {"help", name}} {
			cmd := execBinary(args...)
			var stdout strings.Builder
			cmd.Stdout = &stdout
			err := cmd.Run()
			if code := exitCode(t, err); code != exitOK || !strings.Contains(stdout.String(), firstLine) {
				t.Errorf("car-server %s: exit %d, stdout %q; want exit 0 and the usage", strings.Join(args, " "), code, stdout.String())
			}
		}
		out, code := runBinary(t, name, "--no-such-flag")
		if code != exitUsage || !strings.Contains(out, "usage") {
			t.Errorf("car-server %s --no-such-flag: exit %d, %q; want exit 2 and the usage", name, code, out)
		}
	}
	out, code := runBinary(t, "help")
	if code != exitOK || !strings.Contains(out, "approvals") || !strings.Contains(out, "journal") {
		t.Errorf("car-server help: exit %d, %q", code, out)
	}
	if out, code := runBinary(t, "help", "nonesuch"); code != exitUsage || !strings.Contains(out, `no command "nonesuch"`) {
		t.Errorf("car-server help nonesuch: exit %d, %q", code, out)
	}
}

func TestJournalVerifyOfAMissingFileSaysItIsMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.jsonl")
	out, code := runBinary(t, "journal", "verify", path)
	if code != exitFailed || !strings.Contains(out, path+" does not exist") || strings.Contains(out, "CORRUPT") {
		t.Fatalf("exit %d: %s", code, out)
	}
}

// An error from the daemon is printed as its message, without the client
// library's framing, and a method a command stands for is named as that
// command.
func TestDaemonErrorsSpeakOfCommands(t *testing.T) {
	err := &jsonrpc2.Error{Code: -32602, Message: "not found: no approval 'x' is kept; host.approvals lists them (host.approvals_feed is another)"}
	got := daemonError(err)
	want := "not found: no approval 'x' is kept; car-server approvals watch lists them (host.approvals_feed is another)"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if got := daemonError(errors.New("plain")); got != "plain" {
		t.Fatalf("a plain error became %q", got)
	}
}
