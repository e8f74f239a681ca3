package ui_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/protocol"
)

const hostToken = "host-token-for-the-dashboard-tests"

// deployParams need full_access: the proposal parks for a person.
func deployParams() map[string]any {
	return map[string]any{"env": "prod", "api_key": "sk-live-SECRET-never-shown"}
}

func TestOpeningTheLinkSignsInAndHidesTheToken(t *testing.T) {
	d := startDaemon(t, hostToken)
	p := openPage(t, d.pageURL())
	p.ready()
	if got := eval[string](p, `location.href`); strings.Contains(got, hostToken) || strings.Contains(got, "#") {
		t.Fatalf("the token stayed in the address bar: %s", got)
	}
	if got := eval[string](p, `sessionStorage.getItem("car.host_token")`); got != hostToken {
		t.Fatalf("sessionStorage holds %q, want the host token", got)
	}
	if got := eval[bool](p, `Object.keys(localStorage).length === 0`); !got {
		t.Fatal("the page wrote to localStorage")
	}
	// The roster shows this page as a host-role connection.
	p.until("this page in the roster", `[...document.querySelectorAll("#connections tbody tr")].some(r => r.textContent.includes("(this page)") && r.textContent.includes("host"))`)
}

func TestApproveRunsTheParkedProposal(t *testing.T) {
	d := startDaemon(t, hostToken)
	p := openPage(t, d.pageURL())
	p.ready()
	r := newRunner(t, d, map[string]tool{"deploy_service": echo})
	sub := r.submit(t, "p-approve", "deploy_service", deployParams())

	p.do(chromedp.WaitVisible(chromedp.CSS("#approvals li.approval button.approve")))
	preview := p.text("#approvals li.approval pre.preview")
	if !strings.Contains(preview, `"env": "prod"`) || !strings.Contains(preview, "[redacted]") || strings.Contains(preview, "SECRET") {
		t.Fatalf("preview: %s", preview)
	}
	card := p.text("#approvals li.approval")
	for _, want := range []string{"deploy_service", "full_access", "p-approve"} {
		if !strings.Contains(card, want) {
			t.Fatalf("the approval card lacks %q: %s", want, card)
		}
	}
	p.do(chromedp.Click(chromedp.CSS("#approvals li.approval button.approve")))

	select {
	case call := <-r.calls:
		if call.Tool != "deploy_service" {
			t.Fatalf("callback to %s", call.Tool)
		}
	case <-ctxT(t).Done():
		t.Fatal("approved, but the tool was never called")
	}
	res, err := resultOf(sub.wait(t), "a1")
	if err != nil || res.Status != protocol.StatusSucceeded {
		t.Fatalf("approved action: %+v %v", res, err)
	}
	p.until("the approval to leave the list", `document.querySelectorAll("#approvals li").length === 0`)
	p.until("the proposal to show as succeeded", `document.querySelector('#proposals li[data-id="p-approve"]')?.dataset.status === "succeeded"`)
}

func TestDenyNeedsAReasonAndRejects(t *testing.T) {
	d := startDaemon(t, hostToken)
	p := openPage(t, d.pageURL())
	p.ready()
	r := newRunner(t, d, map[string]tool{"deploy_service": echo})
	sub := r.submit(t, "p-deny", "deploy_service", deployParams())

	p.do(chromedp.WaitVisible(chromedp.CSS("#approvals li.approval button.deny")))
	if !eval[bool](p, `document.querySelector("#approvals li.approval button.deny").disabled`) {
		t.Fatal("Deny is enabled without a reason")
	}
	p.do(chromedp.SendKeys(chromedp.CSS("#approvals li.approval input.reason"), "not on a Friday"),
		chromedp.WaitEnabled(chromedp.CSS("#approvals li.approval button.deny")),
		chromedp.Click(chromedp.CSS("#approvals li.approval button.deny")))

	res, err := resultOf(sub.wait(t), "a1")
	if err != nil || res.Status != protocol.StatusRejected || !strings.Contains(errText(res), "not on a Friday") {
		t.Fatalf("denied action: %+v %v (%s)", res, err, errText(res))
	}
	select {
	case call := <-r.calls:
		t.Fatalf("a denied tool was called: %+v", call)
	default:
	}
	p.until("the approval to leave the list", `document.querySelectorAll("#approvals li").length === 0`)
}

func TestADecisionMadeElsewhereLeavesTheList(t *testing.T) {
	d := startDaemon(t, hostToken)
	p := openPage(t, d.pageURL())
	p.ready()
	r := newRunner(t, d, map[string]tool{"deploy_service": echo})
	sub := r.submit(t, "p-elsewhere", "deploy_service", deployParams())
	p.do(chromedp.WaitVisible(chromedp.CSS("#approvals li.approval")))
	id := eval[string](p, `document.querySelector("#approvals li.approval").dataset.id`)

	other, err := client.Dial(ctxT(t), d.wsURL(), &client.Options{HostToken: hostToken})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Call(ctxT(t), protocol.MethodHostResolveApproval, map[string]any{"approval_id": id, "approved": true}, nil); err != nil {
		t.Fatalf("host.resolve_approval from another host: %v", err)
	}
	p.until("the approval to leave the list", `document.querySelectorAll("#approvals li").length === 0`)
	if res, err := resultOf(sub.wait(t), "a1"); err != nil || res.Status != protocol.StatusSucceeded {
		t.Fatalf("approved elsewhere: %+v %v", res, err)
	}
}

func TestASupervisionIntentIsAllowedFromThePage(t *testing.T) {
	d := startDaemon(t, hostToken)
	p := openPage(t, d.pageURL())
	p.ready()
	p.do(chromedp.Click(chromedp.CSS("#supervise-toggle")))
	p.until("the page to supervise", `document.querySelector("#supervise-toggle").getAttribute("aria-pressed") === "true"`)

	r := newRunner(t, d, map[string]tool{"stage_site": echo})
	sub := r.submit(t, "p-supervised", "stage_site", map[string]any{"site": "docs"})
	p.do(chromedp.WaitVisible(chromedp.CSS("#intents li.intent button.allow")))
	if card := p.text("#intents li.intent"); !strings.Contains(card, "p-supervised") || !strings.Contains(card, "stage_site") {
		t.Fatalf("intent card: %s", card)
	}
	select {
	case call := <-r.calls:
		t.Fatalf("the tool ran before the supervisor decided: %+v", call)
	default:
	}
	p.do(chromedp.Click(chromedp.CSS("#intents li.intent button.allow")))
	if res, err := resultOf(sub.wait(t), "a1"); err != nil || res.Status != protocol.StatusSucceeded {
		t.Fatalf("allowed proposal: %+v %v", res, err)
	}
	p.until("the intent to leave the list", `document.querySelectorAll("#intents li").length === 0`)
}

func TestCancelOnARunningProposalSendsToolsCancel(t *testing.T) {
	d := startDaemon(t, hostToken)
	p := openPage(t, d.pageURL())
	p.ready()
	release := make(chan struct{}) // closed once tools.cancel has come
	r := newRunner(t, d, map[string]tool{"long_job": func(ctx context.Context, _ protocol.ToolExecuteParams) (any, error) {
		select {
		case <-release:
			return nil, errors.New("stopped on tools.cancel")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}})
	sub := r.submit(t, "p-cancel", "long_job", map[string]any{"n": 1})
	select {
	case <-r.calls:
	case <-ctxT(t).Done():
		t.Fatal("the tool was never called")
	}
	sel := `#proposals li[data-id="p-cancel"][data-status="running"] button.cancel`
	p.do(chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Click(chromedp.CSS(sel)))
	select {
	case c := <-r.cancels:
		close(release)
		if !strings.Contains(c.Reason, "cancelled from the dashboard") {
			t.Fatalf("tools.cancel reason %q", c.Reason)
		}
	case <-ctxT(t).Done():
		t.Fatal("Cancel sent no tools.cancel")
	}
	if res, err := resultOf(sub.wait(t), "a1"); err != nil || res.Status != protocol.StatusFailed {
		t.Fatalf("cancelled action: %+v %v", res, err)
	}
	p.until("the proposal to show as cancelled", `document.querySelector('#proposals li[data-id="p-cancel"]')?.dataset.status === "cancelled"`)
}

func TestDaemonDataIsShownAsTextAndRunsNothing(t *testing.T) {
	d := startDaemon(t, hostToken)
	p := openPage(t, d.pageURL())
	p.ready()
	const attack = `<img src=x onerror=window.__carXSS=1>`
	r := newRunner(t, d, map[string]tool{"deploy_service": echo})
	if err := r.Call(ctxT(t), protocol.MethodHostRegisterAgent, map[string]any{"name": attack, "kind": "agent"}, nil); err != nil {
		t.Fatal(err)
	}
	sub := r.submit(t, "p-xss", "deploy_service", map[string]any{"env": attack})
	p.do(chromedp.WaitVisible(chromedp.CSS("#approvals li.approval pre.preview")))
	p.until("the agent in the roster", `document.querySelector("#agents tbody").textContent.includes("<img")`)

	if preview := p.text("#approvals li.approval pre.preview"); !strings.Contains(preview, attack) {
		t.Fatalf("the preview does not show the value as text: %s", preview)
	}
	if n := eval[int](p, `document.querySelectorAll("main img").length`); n != 0 {
		t.Fatalf("%d img elements were made from daemon data", n)
	}
	if set := eval[bool](p, `window.__carXSS !== undefined`); set {
		t.Fatal("the onerror handler ran")
	}
	p.do(chromedp.Click(chromedp.CSS("#approvals li.approval button.approve")))
	sub.wait(t)
}

func TestAPageWithoutATokenShowsHowToGetOne(t *testing.T) {
	d := startDaemon(t, hostToken)
	p := openPage(t, "http://"+d.addr+"/ui/")
	p.do(chromedp.WaitVisible(chromedp.CSS("#help")))
	help := p.text("#help")
	if !strings.Contains(help, "car-server dashboard") || !strings.Contains(help, "without a host token") {
		t.Fatalf("help: %s", help)
	}
	if hidden := eval[bool](p, `document.getElementById("main").hidden`); !hidden {
		t.Fatal("the dashboard shows without a token")
	}
}

func TestATokenRefusedAfterARestartShowsTheHelp(t *testing.T) {
	d := startDaemon(t, hostToken)
	p := openPage(t, d.pageURL())
	p.ready()
	d.restart("a-new-host-token-minted-at-start")
	p.do(chromedp.WaitVisible(chromedp.CSS("#help")))
	help := p.text("#help")
	if !strings.Contains(help, "refused") || !strings.Contains(help, "car-server dashboard") || !strings.Contains(help, "CAR_HOST_TOKEN") {
		t.Fatalf("help after refusal: %s", help)
	}
}

func TestThePageReconnectsAfterARestart(t *testing.T) {
	d := startDaemon(t, hostToken)
	p := openPage(t, d.pageURL())
	p.ready()
	d.stop()
	p.until("the page to say it reconnects", `document.getElementById("status").textContent.includes("reconnecting")`)
	d.start(d.addr) // the host token is pinned: the same one
	p.ready()
	// It subscribed again: a new approval reaches it.
	r := newRunner(t, d, map[string]tool{"deploy_service": echo})
	sub := r.submit(t, "p-after-restart", "deploy_service", deployParams())
	p.do(chromedp.WaitVisible(chromedp.CSS("#approvals li.approval button.approve")),
		chromedp.Click(chromedp.CSS("#approvals li.approval button.approve")))
	if res, err := resultOf(sub.wait(t), "a1"); err != nil || res.Status != protocol.StatusSucceeded {
		t.Fatalf("after the restart: %+v %v", res, err)
	}
}

func TestTheDaemonAdmitsThePagesOwnOriginOnly(t *testing.T) {
	d := startDaemon(t, hostToken)
	dial := func(origin string) error {
		h := http.Header{}
		h.Set("Origin", origin)
		c, err := client.Dial(ctxT(t), d.wsURL(), &client.Options{HostToken: hostToken, Header: h})
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial("http://" + d.addr); err != nil {
		t.Fatalf("the origin the page was served from is refused: %v", err)
	}
	for _, foreign := range []string{"http://evil.example", "http://" + d.addr + ".evil.example", "null"} {
		if err := dial(foreign); err == nil {
			t.Fatalf("origin %s was admitted", foreign)
		}
	}
	resp, err := http.Get("http://" + d.addr + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "connect-src ws://"+d.addr+";") {
		t.Fatalf("GET /ui/: %d %v", resp.StatusCode, resp.Header)
	}
}

func TestOnAPhoneWidthTheKeyboardApproves(t *testing.T) {
	d := startDaemon(t, hostToken)
	p := openPage(t, d.pageURL())
	p.do(chromedp.EmulateViewport(390, 844))
	p.ready()
	r := newRunner(t, d, map[string]tool{"deploy_service": echo})
	sub := r.submit(t, "p-phone", "deploy_service", deployParams())
	p.do(chromedp.WaitVisible(chromedp.CSS("#approvals li.approval button.approve")))
	if fits := eval[bool](p, `document.documentElement.scrollWidth <= window.innerWidth`); !fits {
		t.Fatalf("the page is wider than a phone: %d > %d; too wide: %s", eval[int](p, `document.documentElement.scrollWidth`), eval[int](p, `window.innerWidth`),
			eval[string](p, `[...document.querySelectorAll("body *")].filter(e => e.getBoundingClientRect().right > window.innerWidth + 1).slice(0, 8).map(e => e.tagName + "#" + e.id + "." + e.className).join(" ")`))
	}
	// Keyboard only: focus Approve and press Enter.
	p.do(chromedp.Focus(chromedp.CSS("#approvals li.approval button.approve")), chromedp.KeyEvent("\r"))
	if res, err := resultOf(sub.wait(t), "a1"); err != nil || res.Status != protocol.StatusSucceeded {
		t.Fatalf("approved from the keyboard: %+v %v", res, err)
	}
}
