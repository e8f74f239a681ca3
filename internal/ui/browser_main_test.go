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
	for attempt := 1; attempt <= startAttempts; attempt++ {
		ctx, stop, err := startChromium(path)
		if err == nil {
			defer stop()
			browser.ctx = ctx
			return m.Run()
		}
		fmt.Fprintf(os.Stderr, "internal/ui: starting Chromium at %s, attempt %d of %d: %v\n", path, attempt, startAttempts, err)
	}
	fmt.Fprintf(os.Stderr, "internal/ui: Chromium at %s did not start in %d attempts; the browser tests cannot run\n", path, startAttempts)
	return 1
}

// startAttempts bounds how often a browser that exits while starting is
// started again. Now and then a fresh Chromium crashes before it listens
// (seen once, in a run where every later start would have worked); a browser
// that cannot start at all still fails the run, with each attempt's output.
const startAttempts = 3

// startChromium starts one headless Chromium with a profile of its own and
// waits until it answers; stop ends it and removes the profile.
func startChromium(path string) (ctx context.Context, stop func(), err error) {
	dir, err := os.MkdirTemp("", "car-ui-chromium-")
	if err != nil {
		return nil, nil, fmt.Errorf("a profile directory: %w", err)
	}
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
		// Chromium's own log goes to stderr, which chromedp hands back in
		// the error when the browser exits before it listens.
		chromedp.Flag("enable-logging", "stderr"),
		chromedp.UserDataDir(dir),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	stop = func() {
		cancelBrowser()
		cancelAlloc()
		os.RemoveAll(dir)
	}
	if err := chromedp.Do(bctx); err != nil { // starts the browser
		stop()
		return nil, nil, err
	}
	return bctx, stop, nil
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
