package main

import (
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/config"
)

// TestDNSRebindingRefused: a request whose Host is a name the daemon does
// not answer to (a page on attacker.example rebound to 127.0.0.1) is refused
// with 403 on every TCP path, the profiler's too, while loopback names and
// allowed_hosts are admitted and the Unix socket keeps working. The
// profiler has no cmdline endpoint.
func TestDNSRebindingRefused(t *testing.T) {
	home := t.TempDir()
	d := startDaemon(t, home, "CAR_PPROF=127.0.0.1:0", "CAR_ALLOWED_HOSTS=car.example")
	line, _, err := d.logs.waitFor(ctxT(t), 0, func(l map[string]any) bool {
		msg, _ := l["msg"].(string)
		return strings.HasPrefix(msg, "profiler on")
	})
	if err != nil {
		t.Fatal(err)
	}
	pprofAddr, _ := line["addr"].(string)

	for _, target := range []struct{ addr, path string }{
		{d.addr, "/"},
		{d.addr, "/ui/"},
		{d.addr, "/metrics"},
		{d.addr, "/healthz"},
		{pprofAddr, "/debug/pprof/"},
		{pprofAddr, "/debug/pprof/heap"},
	} {
		_, port, _ := net.SplitHostPort(target.addr)
		rebound := "attacker.example:" + port
		code, body := httpGetHost(t, "http://"+target.addr+target.path, rebound, "http://"+rebound)
		if code != http.StatusForbidden || !strings.Contains(body, "allowed_hosts") {
			t.Errorf("GET %s%s with Host %s: %d %q, want 403 naming allowed_hosts", target.addr, target.path, rebound, code, body)
		}
		for _, host := range []string{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port, "car.example:" + port} {
			if target.path == "/" {
				continue // the WebSocket endpoint answers a plain GET with 426; its upgrade is checked below
			}
			if code, body := httpGetHost(t, "http://"+target.addr+target.path, host, ""); code != http.StatusOK {
				t.Errorf("GET %s%s with Host %s: %d %q, want 200", target.addr, target.path, host, code, body)
			}
		}
	}
	if code, _ := httpGetHost(t, "http://"+pprofAddr+"/debug/pprof/cmdline", pprofAddr, ""); code != http.StatusNotFound {
		t.Errorf("GET /debug/pprof/cmdline: %d, want 404", code)
	}

	_, port, _ := net.SplitHostPort(d.addr)
	for _, tc := range []struct {
		host string
		want int
	}{
		{"attacker.example:" + port, http.StatusForbidden},
		{"localhost:" + port, http.StatusSwitchingProtocols},
		{"car.example:" + port, http.StatusSwitchingProtocols},
	} {
		h := http.Header{}
		h.Set("Origin", "http://"+tc.host)
		got := http.StatusSwitchingProtocols
		ws, resp, err := websocket.Dial(ctxT(t), "ws://"+d.addr+"/", &websocket.DialOptions{Host: tc.host, HTTPHeader: h})
		switch {
		case err == nil:
			ws.CloseNow()
		case resp != nil:
			got = resp.StatusCode
		default:
			t.Fatalf("upgrade with Host %s: %v", tc.host, err)
		}
		if got != tc.want {
			t.Errorf("WebSocket upgrade with Host %s: %d, want %d", tc.host, got, tc.want)
		}
	}

	u, err := client.Dial(ctxT(t), "ws://car-server/", &client.Options{Token: d.token, SocketPath: filepath.Join(home, "run", "car-server.sock")})
	if err != nil {
		t.Fatalf("dial the Unix socket: %v", err)
	}
	defer u.Close()
	var keys []string
	if err := u.Call(ctxT(t), "state.keys", nil, &keys); err != nil {
		t.Fatalf("state.keys over the Unix socket: %v", err)
	}
}

func TestListenHostsAdmitsABindName(t *testing.T) {
	for _, tc := range []struct {
		bind    string
		allowed []string
		want    string
	}{
		{"car.internal", []string{"a.example"}, "a.example,car.internal"},
		{"car.internal", nil, "car.internal"},
		{"0.0.0.0", []string{"a.example"}, "a.example"},
		{"::1", nil, ""},
	} {
		got := listenHosts(&config.Config{Bind: tc.bind, AllowedHosts: tc.allowed})
		if strings.Join(got, ",") != tc.want {
			t.Errorf("bind %s, allowed %v: %v, want %s", tc.bind, tc.allowed, got, tc.want)
		}
	}
}
