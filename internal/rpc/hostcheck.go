package rpc

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"

	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/internal/netaddr"
)

// GuardHost answers 403 to a request on a TCP listener whose Host header
// does not name this daemon, so that a web page on a name the attacker
// controls (DNS rebinding) cannot reach next from a browser: a page's
// requests carry its own name as Host, whatever address the name resolves
// to. Admitted are a loopback name (localhost, 127.0.0.1, [::1], any port),
// the address the request arrived at (the listen address, or for a
// wildcard bind the interface address the client dialled; any port), and
// each entry of allowed: a name (any port) or a name:port (that port only),
// case-insensitively; an IPv6 address is written with or without brackets,
// and in brackets with a port. A Unix socket listener is not checked: its file mode
// is its check, and clients dial it with a placeholder host.
func GuardHost(l net.Listener, allowed []string, log *zap.Logger, next http.Handler) http.Handler {
	if l.Addr().Network() == "unix" {
		return next
	}
	if log == nil {
		log = zap.NewNop()
	}
	g := &hostGuard{next: next, log: log, listen: l.Addr()}
	for _, a := range allowed {
		a = strings.ToLower(strings.TrimSpace(a))
		if strings.HasPrefix(a, "[") && strings.HasSuffix(a, "]") {
			a = a[1 : len(a)-1] // an IPv6 address without a port: admits = name
		}
		if a != "" {
			g.allowed = append(g.allowed, a)
		}
	}
	return g
}

type hostGuard struct {
	next    http.Handler
	log     *zap.Logger
	listen  net.Addr
	allowed []string // lower case: name or name:port
}

func (g *hostGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.admits(r) {
		g.next.ServeHTTP(w, r)
		return
	}
	g.log.Warn("request refused: Host is not this daemon", zap.String("host", r.Host), zap.String("path", r.URL.Path), zap.String("remote", r.RemoteAddr))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusForbidden)
	_, _ = fmt.Fprintf(w, "car-server: Host %q is not this daemon's address; to admit it, add it to the allowed_hosts setting (--allowed-hosts, CAR_ALLOWED_HOSTS)\n", r.Host)
}

// admits reports whether r's Host names this daemon.
func (g *hostGuard) admits(r *http.Request) bool {
	hostport := strings.ToLower(r.Host)
	name := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
	if name == "" {
		return false
	}
	if netaddr.IsLoopbackHost(name) {
		return true
	}
	if ip := net.ParseIP(name); ip != nil && g.arrivedAt(r, ip) {
		return true
	}
	for _, a := range g.allowed {
		if a == hostport || a == name {
			return true
		}
	}
	return false
}

// arrivedAt reports whether ip is the address r came in on: the listener's,
// or, when it listens on every interface, the connection's local address.
func (g *hostGuard) arrivedAt(r *http.Request, ip net.IP) bool {
	if ta, ok := g.listen.(*net.TCPAddr); ok && !ta.IP.IsUnspecified() {
		return ta.IP.Equal(ip)
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	ta, ok := local.(*net.TCPAddr)
	return ok && ta.IP.Equal(ip)
}

// GuardOrigin applies the WebSocket listener's Origin rule to a plain HTTP
// endpoint (the MCP endpoint): a request without Origin (not from a
// browser) passes; one with an Origin passes when the Origin's host is the
// request's Host, or matches one of allowed (allowed_origins: host
// patterns, path.Match syntax, case-insensitive), as websocket.Accept
// checks an upgrade. Anything else is 403, saying which setting admits it.
func GuardOrigin(allowed []string, log *zap.Logger, next http.Handler) http.Handler {
	if log == nil {
		log = zap.NewNop()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" || originAdmitted(origin, r.Host, allowed) {
			next.ServeHTTP(w, r)
			return
		}
		log.Warn("request refused: foreign Origin", zap.String("origin", origin), zap.String("path", r.URL.Path), zap.String("remote", r.RemoteAddr))
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusForbidden)
		_, _ = fmt.Fprintf(w, "car-server: Origin %q is not this daemon; to admit it, add its host to the allowed_origins setting (--allowed-origins, CAR_ALLOWED_ORIGINS)\n", origin)
	})
}

// originAdmitted is websocket.Accept's rule for an Origin header.
func originAdmitted(origin, host string, allowed []string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, host) {
		return true
	}
	for _, p := range allowed {
		if ok, err := path.Match(strings.ToLower(p), strings.ToLower(u.Host)); err == nil && ok {
			return true
		}
	}
	return false
}
