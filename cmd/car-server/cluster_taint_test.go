package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
	"github.com/parslee-ai/car-server/protocol"
)

// submitActions sends a proposal of several actions and returns its
// results by action id.
func submitActions(t *testing.T, c *client.Client, proposalID string, actions ...map[string]any) map[string]protocol.ActionResult {
	t.Helper()
	var res protocol.ProposalResult
	p := map[string]any{"id": proposalID, "actions": actions}
	if err := c.Call(ctxT(t), protocol.MethodProposalSubmit, map[string]any{"proposal": p}, &res); err != nil {
		t.Fatal(err)
	}
	out := map[string]protocol.ActionResult{}
	for _, r := range res.Results {
		out[r.ActionID] = r
	}
	return out
}

// taintOf is taint.list on c for key: its entry, if tainted.
func taintOf(t *testing.T, c *client.Client, key string) (protocol.TaintEntry, bool) {
	t.Helper()
	var l protocol.TaintListResult
	if err := c.Call(ctxT(t), protocol.MethodTaintList, map[string]any{"keys": []string{key}}, &l); err != nil {
		t.Fatal(err)
	}
	if len(l.Tainted) == 0 {
		return protocol.TaintEntry{}, false
	}
	return l.Tainted[0], true
}

// TestClusterTaintOnOneDaemonGatesAnother: two daemons share a PostgreSQL
// store and the operator's intent. Untrusted data written on A refuses the
// influenced mail on B, naming the key and A's action; the same data read
// with state.get on B and written back with state.set stays tainted for A;
// a trusted overwrite on B clears the key for A, where the mail is then
// drift, waiting for a person, not influenced.
func TestClusterTaintOnOneDaemonGatesAnother(t *testing.T) {
	url := pgtest.URL(t)
	env := []string{"CAR_STORE=postgres", "CAR_POSTGRES_URL=" + url, "CAR_HEARTBEAT=300ms", "GORACE=atexit_sleep_ms=0"}
	intent := `{"intent": "summarise the news", "allowed_tools": ["web_fetch", "read_*"], "untrusted_tools": ["web_fetch"]}`
	var ds []*daemon
	for range 2 {
		home := t.TempDir()
		if err := os.WriteFile(filepath.Join(home, "intent.json"), []byte(intent), 0o600); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, startDaemon(t, home, env...))
	}
	a, b := ds[0], ds[1]
	fetcher := newToolbox(t, a, protocol.ToolSchema{Name: "web_fetch"})
	got := submitActions(t, fetcher.Client, "p-fetch", toolCall("f", "web_fetch", "page"),
		map[string]any{"id": "w", "type": "state_write", "parameters": map[string]any{"key": "page", "value": "$f.output"}})
	if got["w"].Status != protocol.StatusSucceeded {
		t.Fatalf("fetching on A: %+v", got)
	}
	mail := func(c *client.Client, id, key string) protocol.ActionResult {
		t.Helper()
		return submitActions(t, c, id, map[string]any{"id": "r", "type": "state_read", "parameters": map[string]any{"key": key}},
			toolCall("m", "send_email", "mail-"+id, "body", "$r.output"))["m"]
	}
	mailerB := newToolbox(t, b, protocol.ToolSchema{Name: "send_email"})
	m := mail(mailerB.Client, "mail-on-b", "page")
	if m.Status != protocol.StatusRejected || !strings.Contains(m.ErrorText(), "influenced by untrusted data") ||
		!strings.Contains(m.ErrorText(), "state key 'page', tainted by proposal p-fetch action 'w'") || !strings.Contains(m.ErrorText(), "untrusted tool 'web_fetch'") {
		t.Fatalf("the mail on B: %s %s", m.Status, m.ErrorText())
	}
	if n := mailerB.count("mail-mail-on-b"); n != 0 {
		t.Fatalf("the refused mail was dispatched %d times", n)
	}

	// Laundering through state on B: still tainted, for A too.
	launderer := b.dial(t)
	defer launderer.Close()
	var page any
	if err := launderer.Call(ctxT(t), protocol.MethodStateGet, map[string]any{"key": "page"}, &page); err != nil {
		t.Fatal(err)
	}
	if err := launderer.Call(ctxT(t), protocol.MethodStateSet, map[string]any{"key": "copy", "value": page}, nil); err != nil {
		t.Fatal(err)
	}
	onA := newToolbox(t, a, protocol.ToolSchema{Name: "send_email"})
	if e, ok := taintOf(t, onA.Client, "copy"); !ok || !strings.Contains(e.Origin, "state key 'page' read with state.get") {
		t.Fatalf("copy, seen from A: %+v %v", e, ok)
	}
	if m := mail(onA.Client, "copy-on-a", "copy"); m.Status != protocol.StatusRejected || !strings.Contains(m.ErrorText(), "state key 'copy'") {
		t.Fatalf("the mail of the laundered copy on A: %s %s", m.Status, m.ErrorText())
	}

	// A trusted overwrite on B clears page for A.
	person := b.dial(t)
	defer person.Close()
	if err := person.Call(ctxT(t), protocol.MethodStateSet, map[string]any{"key": "page", "value": "a summary a person wrote"}, nil); err != nil {
		t.Fatal(err)
	}
	if e, ok := taintOf(t, onA.Client, "page"); ok {
		t.Fatalf("page on A after a trusted overwrite on B: %+v", e)
	}
	m = mail(onA.Client, "page-on-a", "page")
	if m.Status != protocol.StatusRejected || !strings.Contains(m.ErrorText(), "escalated to approval") || strings.Contains(m.ErrorText(), "influenced by untrusted data:") {
		t.Fatalf("the mail on A after the overwrite: %s %s", m.Status, m.ErrorText())
	}
}
