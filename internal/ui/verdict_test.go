package ui_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/protocol"
)

// verdict is the line a finished proposal's card says how it ended with,
// once its status is want.
func verdict(p *page, id, want string) string {
	p.t.Helper()
	sel := `document.querySelector('#proposals li[data-id="` + id + `"]')`
	p.until("proposal "+id+" to show as "+want, sel+`?.dataset.status === "`+want+`"`)
	return eval[string](p, sel+`.querySelector("p.verdict")?.textContent ?? ""`)
}

// TestARejectedProposalSaysWhoRejectedItAndWhy: a proposal a person denied
// is shown as rejected, not failed, with "rejected by <who>: <reason>",
// who being the person (person:operator, the daemon's host token this page
// holds), or the principal of a plain client's connection while it is
// connected (by its connection id until the page has read who that is).
func TestARejectedProposalSaysWhoRejectedItAndWhy(t *testing.T) {
	d := startDaemon(t, hostToken)
	p := openPage(t, d.pageURL())
	p.ready()
	r := newRunner(t, d, map[string]tool{"deploy_service": echo})

	// Denied on this page.
	sub := r.submit(t, "p-denied-here", "deploy_service", deployParams())
	p.do(chromedp.WaitVisible(chromedp.CSS("#approvals li.approval button.deny")),
		chromedp.SendKeys(chromedp.CSS("#approvals li.approval input.reason"), "not on a Friday"),
		chromedp.WaitEnabled(chromedp.CSS("#approvals li.approval button.deny")),
		chromedp.Click(chromedp.CSS("#approvals li.approval button.deny")))
	if res, err := resultOf(sub.wait(t), "a1"); err != nil || res.Status != protocol.StatusRejected {
		t.Fatalf("denied: %+v %v", res, err)
	}
	want := "rejected by person:operator: not on a Friday" // the page holds the daemon's own host token
	if got := verdict(p, "p-denied-here", "rejected"); got != want {
		t.Fatalf("the denied proposal says %q; want %q", got, want)
	}

	// Denied by a plain client (approver_role any), named by its principal
	// once the page has read the roster.
	other, err := client.Dial(ctxT(t), d.wsURL(), &client.Options{Token: authToken})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var self protocol.ServerConnectionsResult
	if err := other.Call(ctxT(t), protocol.MethodServerConnections, nil, &self); err != nil {
		t.Fatal(err)
	}
	sub = r.submit(t, "p-denied-elsewhere", "deploy_service", map[string]any{"env": "staging"}) // another operation: the ledger holds the first one's no
	p.do(chromedp.WaitVisible(chromedp.CSS("#approvals li.approval")))
	id := eval[string](p, `document.querySelector("#approvals li.approval").dataset.id`)
	if err := other.Call(ctxT(t), protocol.MethodHostResolveApproval, map[string]any{"approval_id": id, "approved": false, "notes": "the change freeze"}, nil); err != nil {
		t.Fatalf("host.resolve_approval from another host: %v", err)
	}
	sub.wait(t)
	if got := verdict(p, "p-denied-elsewhere", "rejected"); !strings.HasPrefix(got, "rejected by ") || !strings.Contains(got, self.Self[:8]) || !strings.HasSuffix(got, ": the change freeze") {
		t.Fatalf("the proposal another host denied says %q; want rejected by its connection %s: the change freeze", got, self.Self)
	}
	want = "rejected by plain client car-server-go-client, connection " + self.Self[:8] + "…: the change freeze"
	p.until("the reviewer named by its principal", `document.querySelector('#proposals li[data-id="p-denied-elsewhere"] p.verdict')?.textContent === `+jsString(want))
}

// TestASupervisorsDenySaysWhoAndWhy: a proposal a supervisor denied says
// who denied it and the reason they gave.
func TestASupervisorsDenySaysWhoAndWhy(t *testing.T) {
	d := startDaemon(t, hostToken)
	p := openPage(t, d.pageURL())
	p.ready()
	p.do(chromedp.Click(chromedp.CSS("#supervise-toggle")))
	p.until("the page to supervise", `document.querySelector("#supervise-toggle").getAttribute("aria-pressed") === "true"`)
	r := newRunner(t, d, map[string]tool{"stage_site": echo})
	sub := r.submit(t, "p-supervised-deny", "stage_site", map[string]any{"site": "docs"})
	p.do(chromedp.WaitVisible(chromedp.CSS("#intents li.intent button.deny")),
		chromedp.SendKeys(chromedp.CSS("#intents li.intent input.reason"), "staging is frozen"),
		chromedp.WaitEnabled(chromedp.CSS("#intents li.intent button.deny")),
		chromedp.Click(chromedp.CSS("#intents li.intent button.deny")))
	if res, err := resultOf(sub.wait(t), "a1"); err != nil || res.Status != protocol.StatusRejected {
		t.Fatalf("denied by the supervisor: %+v %v", res, err)
	}
	got := verdict(p, "p-supervised-deny", "rejected")
	if want := "rejected by person:operator: staging is frozen"; got != want {
		t.Fatalf("the denied proposal says %q; want %q", got, want)
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s) // a string always encodes
	return string(b)
}
