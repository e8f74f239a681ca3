package ui_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/chromedp/chromedp"
)

// browser is the one headless Chromium every test of this package opens its
// tabs in; missing says why there is none.
var browser struct {
	ctx     context.Context
	missing string
}

func TestMain(m *testing.M) {
	os.Exit(runWithBrowser(m))
}

func runWithBrowser(m *testing.M) int {
	path := findChromium()
	if path == "" {
		browser.missing = "no Chromium found (install the distribution's package `chromium`, or point CAR_CHROMIUM at a Chromium binary)"
		if os.Getenv("CI") == "true" {
			fmt.Fprintln(os.Stderr, "internal/ui:", browser.missing, "- under CI=true the browser tests must run")
			return 1
		}
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "car-ui-chromium-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "internal/ui: a profile directory for Chromium:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox, // the tests may run as root
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(dir),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	if err := chromedp.Do(bctx); err != nil { // starts the browser
		fmt.Fprintf(os.Stderr, "internal/ui: starting Chromium at %s: %v\n", path, err)
		return 1
	}
	browser.ctx = bctx
	return m.Run()
}

// findChromium is $CAR_CHROMIUM, or a Chromium on PATH.
func findChromium() string {
	if p := os.Getenv("CAR_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// needBrowser skips a test when there is no browser (outside CI).
func needBrowser(t *testing.T) {
	t.Helper()
	if browser.ctx == nil {
		t.Skip(browser.missing)
	}
}
