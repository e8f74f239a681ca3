package ui_test

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/parslee-ai/car-server/client"

	"github.com/parslee-ai/car-server/protocol"
)

// TestReadmeScreenshot shows the dashboard with some work on it; with
// CAR_UPDATE_SCREENSHOT=1 it also writes docs/dashboard.png for the README.
func TestReadmeScreenshot(t *testing.T) {
	d := startDaemon(t, hostToken)
	p := openPage(t, d.pageURL())
	p.ready()
	var rp atomic.Pointer[runner] // set before any call can arrive
	r := newRunner(t, d, map[string]tool{"read_file": echo, "deploy_service": echo, "run_test_suite": func(_ context.Context, call protocol.ToolExecuteParams) (any, error) {
		return rp.Load().Stream(call, func(ctx context.Context, _ protocol.ToolExecuteParams, w *client.ChunkWriter) (any, error) {
			if err := w.Progress(ctx, 0.42, "412 of 980 tests"); err != nil {
				return nil, err
			}
			<-ctx.Done() // until the runner closes
			return nil, ctx.Err()
		})
	}})
	rp.Store(r)
	if err := r.Call(ctxT(t), protocol.MethodHostRegisterAgent, map[string]any{"name": "release-bot", "kind": "agent"}, nil); err != nil {
		t.Fatal(err)
	}
	done := r.submit(t, "p-readme", "read_file", map[string]any{"path": "/srv/site/index.md"})
	if res, err := resultOf(done.wait(t), "a1"); err != nil || res.Status != protocol.StatusSucceeded {
		t.Fatalf("read_file: %+v %v", res, err)
	}
	startStream(t, r, "p-tests", "run_test_suite")
	rollback := r.submit(t, "p-rollback", "deploy_service", map[string]any{"env": "prod", "version": "2.3.9"})
	p.do(chromedp.WaitVisible(chromedp.CSS("#approvals li.approval input.reason")),
		chromedp.SendKeys(chromedp.CSS("#approvals li.approval input.reason"), "2.3.9 has the cache bug: roll forward"),
		chromedp.WaitEnabled(chromedp.CSS("#approvals li.approval button.deny")),
		chromedp.Click(chromedp.CSS("#approvals li.approval button.deny")))
	rollback.wait(t)
	p.until("the rejected proposal", `document.querySelector('#proposals li[data-id="p-rollback"]')?.dataset.status === "rejected"`)
	waiting := r.submit(t, "p-deploy", "deploy_service", map[string]any{"env": "prod", "version": "2.4.1", "api_key": "sk-live-never-shown"})
	p.do(chromedp.WaitVisible(chromedp.CSS("#approvals li.approval")))
	p.until("the finished proposal", `document.querySelector('#proposals li[data-id="p-readme"]')?.dataset.status === "succeeded"`)
	p.until("the running tool's progress", `document.querySelector("#tools progress")?.value === 0.42`)
	p.until("the health counts", `document.getElementById("health").textContent.includes("100.0 %")`)
	p.until("the runner in the roster", `document.getElementById("connections").tBodies[0].textContent.includes("plain client")`)
	if os.Getenv("CAR_UPDATE_SCREENSHOT") == "1" {
		p.screenshot(filepath.Join("..", "..", "docs", "dashboard.png"))
	}
	p.do(chromedp.Click(chromedp.CSS("#approvals li.approval button.approve")))
	waiting.wait(t)
}
