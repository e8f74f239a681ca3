package ui_test

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
)

// heldProxy serves the daemon's page through a loopback reverse proxy that
// holds the page's WebSocket until release is closed, so a test sees the
// page as it is before its first data.
type heldProxy struct {
	addr    string
	release chan struct{}
}

func holdWebSocket(t *testing.T, d *daemon) *heldProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hp := &heldProxy{addr: l.Addr().String(), release: make(chan struct{})}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: d.addr})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			select {
			case <-hp.release:
			case <-r.Context().Done():
				return
			}
		}
		proxy.ServeHTTP(w, r)
	})}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; err != http.ErrServerClosed {
			t.Errorf("the proxy: %v", err)
		}
	})
	return hp
}

// TestPanelsSayTheyAreLoadingUntilTheirFirstData: while the page waits for
// the daemon, every panel says it is loading instead of showing an empty
// Health, Connections or Policies (or "nothing waits"); once the data
// comes, each shows it and the loading line is gone.
func TestPanelsSayTheyAreLoadingUntilTheirFirstData(t *testing.T) {
	d := startDaemon(t, hostToken)
	hp := holdWebSocket(t, d)
	p := openPage(t, "http://"+hp.addr+"/ui/#host_token="+hostToken)
	panels := []string{"approvals-panel", "tools-panel", "proposals-panel", "health-panel", "roster-panel", "policies-panel", "events-panel"}
	// visible lists the panels whose loading line shows and whose
	// content does not.
	const visible = `[...document.querySelectorAll("main > section.panel")].filter(s =>
		s.getAttribute("aria-busy") === "true" && s.querySelector(".loading")?.offsetParent !== null &&
		[...s.querySelectorAll(".empty, .scroll, .stats, .chart")].every(e => e.offsetParent === null)).map(s => s.id).join(" ")`
	p.until("the page to wait for the daemon", `document.getElementById("status").textContent === "Connecting…"`)
	if got := eval[string](p, visible); got != strings.Join(panels, " ") {
		t.Fatalf("before any data, the panels showing only that they load: %q; want %q", got, strings.Join(panels, " "))
	}
	close(hp.release)
	p.ready()
	if got := eval[string](p, `[...document.querySelectorAll("main .loading")].filter(e => e.offsetParent !== null).map(e => e.closest("section").id).join(" ")`); got != "" {
		t.Fatalf("still loading once live: %s", got)
	}
	for sel, want := range map[string]string{"#health": "success rate", "#connections tbody": "(this page)", "#policies": "No policy is in force."} {
		if got := p.text(sel); !strings.Contains(got, want) {
			t.Errorf("%s shows %q; want %q", sel, got, want)
		}
	}
}
