package main

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/parslee-ai/car-server/internal/fdlimit"
)

// TestOpenFileLimit: the daemon raises its soft open-file limit to the hard
// limit and logs it, and warns when max_connections needs more than that.
func TestOpenFileLimit(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	// The daemon inherits a low soft limit, as from a login shell.
	low := lim
	low.Cur = min(lim.Max, 512)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			t.Error(err)
		}
	})

	d := startDaemon(t, t.TempDir())
	line, _, err := d.logs.wait(ctxT(t), 0, "open-file limit")
	if err != nil {
		t.Fatal(err)
	}
	// What the daemon should have got: the hard limit, or on macOS the
	// system's cap when that is lower; the same raise here says which.
	want, err := fdlimit.Raise()
	if err != nil {
		t.Fatal(err)
	}
	if line["soft"] != float64(want.Soft) || line["hard"] != float64(want.Hard) {
		t.Fatalf("the daemon logged soft %v and hard %v, want %d and %d", line["soft"], line["hard"], want.Soft, want.Hard)
	}
	if line["max_connections_needs"] != float64(16384+fileReserve) {
		t.Fatalf("max_connections_needs is %v, want %d (the default max_connections and the reserve)", line["max_connections_needs"], 16384+fileReserve)
	}
	d.stop(t)

	over := strconv.FormatUint(want.Soft, 10)
	d = startDaemon(t, t.TempDir(), "CAR_MAX_CONNECTIONS="+over)
	warn, _, err := d.logs.waitFor(ctxT(t), 0, func(l map[string]any) bool {
		msg, _ := l["msg"].(string)
		return strings.HasPrefix(msg, "the open-file limit is below what max_connections needs")
	})
	if err != nil {
		t.Fatalf("no warning with max_connections %s over a limit of %d: %v", over, want.Soft, err)
	}
	if warn["level"] != "warn" || warn["limit"] != float64(want.Soft) {
		t.Fatalf("warning: %v", warn)
	}
}

// TestProfilerIsOffUnlessAsked: /debug/pprof/ is not served by default, and
// with the pprof setting it is served on its own loopback address.
func TestProfilerIsOffUnlessAsked(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	if code, _ := httpGet(t, "http://"+d.addr+"/debug/pprof/"); code != http.StatusNotFound {
		t.Fatalf("the daemon's address answers /debug/pprof/ with %d, want 404", code)
	}
	d.stop(t)
	if l, _, err := d.logs.waitFor(ctxT(t), 0, func(l map[string]any) bool {
		msg, _ := l["msg"].(string)
		return strings.HasPrefix(msg, "profiler on")
	}); err == nil {
		t.Fatalf("the profiler started without the pprof setting: %v", l)
	}

	d = startDaemon(t, t.TempDir(), "CAR_PPROF=127.0.0.1:0")
	line, _, err := d.logs.waitFor(ctxT(t), 0, func(l map[string]any) bool {
		msg, _ := l["msg"].(string)
		return strings.HasPrefix(msg, "profiler on")
	})
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := line["addr"].(string)
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("the profiler listens on %q, want loopback", addr)
	}
	if code, _ := httpGet(t, "http://"+addr+"/debug/pprof/heap"); code != http.StatusOK {
		t.Fatalf("the profiler answered %d", code)
	}
}

// httpGet is GET url on a connection of its own: the status code and the
// body.
func httpGet(t *testing.T, url string) (code int, body string) {
	t.Helper()
	return httpGetHost(t, url, "", "")
}

// httpGetHost is httpGet with the given Host and Origin headers (each
// unless empty).
func httpGetHost(t *testing.T, url, host, origin string) (code int, body string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}
