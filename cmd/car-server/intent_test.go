package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

// TestIntentLoadsReloadsAndAMalformedOneRefusesTheStart: the operator's
// intent.json is read at start, swapped on SIGHUP (a bad file keeps the
// intent in force, naming the file), and a malformed one stops the start.
func TestIntentLoadsReloadsAndAMalformedOneRefusesTheStart(t *testing.T) {
	home := t.TempDir()
	path := filepath.Join(home, "intent.json")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"intent": "summarise", "allowed_tools": ["web_fetch"], "untrusted_tools": ["web_fetch"]}`)
	d := startDaemon(t, home)
	c := d.dial(t)
	intent := func() protocol.IntentState {
		t.Helper()
		var st protocol.IntentState
		if err := c.Call(ctxT(t), protocol.MethodSessionIntentGet, nil, &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := intent(); st.Operator == nil || st.Operator.Intent != "summarise" {
		t.Fatalf("at start: %+v", st)
	}

	write(`{"intent": "triage", "forbidden_tools": ["send_email"]}`)
	if err := d.signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	d.waitLog(t, "operator intent reloaded")
	if st := intent(); st.Operator == nil || st.Operator.Intent != "triage" || st.Operator.AllowedTools != nil {
		t.Fatalf("after the reload: %+v", st.Operator)
	}
	write(`{"intent": "x", "forbidden_capabilities": ["teleport"]}`)
	if err := d.signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if line := d.waitLog(t, "intent reload failed; the previous intent stays in force"); !strings.Contains(fmt.Sprint(line["error"]), path) {
		t.Fatalf("the reload error should name the file: %v", line)
	}
	if st := intent(); st.Operator == nil || st.Operator.Intent != "triage" {
		t.Fatalf("a bad reload changed the intent: %+v", st.Operator)
	}

	d.stop(t)
	if out, code := runBinary(t, "--home", home, "--port", "0"); code != 1 || !strings.Contains(out, path) || !strings.Contains(out, "unknown capability 'teleport'") {
		t.Fatalf("start with a malformed intent: exit %d\n%s", code, out)
	}
}
