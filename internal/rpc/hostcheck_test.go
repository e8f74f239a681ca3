package rpc

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

// getWithHost sends GET path to the server's TCP address with the given Host and
// Origin, and returns the status and body.
func getWithHost(t *testing.T, client *http.Client, base, path, host, origin string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s with Host %s: %v", path, host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return resp.StatusCode, string(body)
}

// upgradeWithHost opens the WebSocket with the given Host and Origin; it
// returns the HTTP status of a refusal, or 101 on success.
func upgradeWithHost(t *testing.T, url, host, origin string) int {
	t.Helper()
	h := http.Header{}
	h.Set("Origin", origin)
	ws, resp, err := websocket.Dial(ctxT(t), url, &websocket.DialOptions{Host: host, HTTPHeader: h})
	if err == nil {
		ws.CloseNow()
		return http.StatusSwitchingProtocols
	}
	if resp == nil {
		t.Fatalf("upgrade with Host %s: %v", host, err)
	}
	return resp.StatusCode
}

func TestDNSRebindingRefusedOnEveryPath(t *testing.T) {
	ts := startServer(t, Options{Token: testToken})
	addr := strings.TrimSuffix(strings.TrimPrefix(ts.url, "ws://"), "/")
	_, port, _ := net.SplitHostPort(addr)
	base := "http://" + addr
	rebound := "attacker.example:" + port
	origin := "http://" + rebound

	if code := upgradeWithHost(t, ts.url, rebound, origin); code != http.StatusForbidden {
		t.Errorf("WebSocket upgrade with Host %s: status %d, want 403", rebound, code)
	}
	for _, path := range []string{"/", "/ui/", "/metrics", "/healthz"} {
		code, body := getWithHost(t, http.DefaultClient, base, path, rebound, origin)
		if code != http.StatusForbidden || !strings.Contains(body, "allowed_hosts") || !strings.Contains(body, rebound) {
			t.Errorf("GET %s with Host %s: %d %q, want 403 naming the Host and allowed_hosts", path, rebound, code, body)
		}
	}
	if n := ts.logs.count("request refused: Host is not this daemon"); n != 5 {
		t.Errorf("%d refusals logged, want 5", n)
	}

	for _, host := range []string{"localhost:" + port, "LOCALHOST", "127.0.0.1:" + port, "127.0.0.1", "[::1]:" + port, "[::1]"} {
		if code, body := getWithHost(t, http.DefaultClient, base, "/healthz", host, ""); code != http.StatusOK {
			t.Errorf("GET /healthz with loopback Host %s: %d %q, want 200", host, code, body)
		}
	}
	host := "localhost:" + port
	if code := upgradeWithHost(t, ts.url, host, "http://"+host); code != http.StatusSwitchingProtocols {
		t.Errorf("WebSocket upgrade with Host %s: status %d, want 101", host, code)
	}
	// The Origin check stays: an admitted Host with a foreign Origin is refused.
	if code := upgradeWithHost(t, ts.url, host, origin); code != http.StatusForbidden {
		t.Errorf("WebSocket upgrade with Host %s and Origin %s: status %d, want 403", host, origin, code)
	}
}

func TestAllowedHostsAdmitted(t *testing.T) {
	ts := startServer(t, Options{Token: testToken, AllowedHosts: []string{"car.example", " Proxy.example:8443 ", "[2001:DB8::5]"}})
	addr := strings.TrimSuffix(strings.TrimPrefix(ts.url, "ws://"), "/")
	_, port, _ := net.SplitHostPort(addr)
	base := "http://" + addr
	for _, tc := range []struct {
		host string
		want int
	}{
		{"car.example:" + port, http.StatusOK},
		{"CAR.example", http.StatusOK},
		{"proxy.example:8443", http.StatusOK},
		{"proxy.example:" + port, http.StatusForbidden}, // listed with another port
		{"sub.car.example:" + port, http.StatusForbidden},
		{"[2001:db8::5]:" + port, http.StatusOK}, // listed in brackets, without a port
		{"[2001:db8::5]", http.StatusOK},
		{"[2001:db8::6]:" + port, http.StatusForbidden},
		{"attacker.example:" + port, http.StatusForbidden},
	} {
		if code, body := getWithHost(t, http.DefaultClient, base, "/healthz", tc.host, ""); code != tc.want {
			t.Errorf("GET /healthz with Host %s: %d %q, want %d", tc.host, code, body, tc.want)
		}
	}
	host := "car.example:" + port
	if code := upgradeWithHost(t, ts.url, host, "http://"+host); code != http.StatusSwitchingProtocols {
		t.Errorf("WebSocket upgrade with allowed Host %s: status %d, want 101", host, code)
	}
}

func TestUnixSocketSkipsTheHostCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "car-server.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	startServerWith(t, serverSetup{opts: Options{Token: testToken}, listener: l})
	overSocket := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}}
	defer overSocket.CloseIdleConnections()
	if code, body := getWithHost(t, overSocket, "http://car-server", "/healthz", "attacker.example", ""); code != http.StatusOK {
		t.Fatalf("GET /healthz over the Unix socket: %d %q, want 200", code, body)
	}
}
