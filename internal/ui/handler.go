package ui

import (
	"embed"
	"html"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed assets
var assets embed.FS

// Prefix is where the rpc listener mounts Handler.
const Prefix = "/ui/"

// Options configure the dashboard page.
type Options struct {
	// TraceURL is a link template to a proposal's trace, naming
	// {trace_id} (otel_trace_url, checked by the daemon's config); the
	// page reads it from <meta name="car-trace-url">. "" shows the trace
	// id without a link.
	TraceURL string
}

// Handler serves the dashboard's assets under Prefix, each response with the
// security headers (see headers).
func Handler(opts Options) http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil { // the embed directive guarantees the directory
		panic("ui: embedded assets missing: " + err.Error())
	}
	files := http.StripPrefix(Prefix, http.FileServerFS(sub))
	var index []byte
	if opts.TraceURL != "" {
		index = withMeta(sub, "car-trace-url", opts.TraceURL)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !validHost(r.Host) {
			http.Error(w, "the dashboard needs a plain host:port Host header", http.StatusBadRequest)
			return
		}
		headers(w.Header(), r.Host)
		if index != nil && (r.URL.Path == Prefix || r.URL.Path == Prefix+"index.html") {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write(index)
			return
		}
		files.ServeHTTP(w, r)
	})
}

// withMeta is index.html with <meta name=name content=value> in its head,
// the value escaped: how the page learns a setting without an inline
// script, which its policy forbids.
func withMeta(sub fs.FS, name, value string) []byte {
	page, err := fs.ReadFile(sub, "index.html")
	if err != nil { // embedded, so present
		panic("ui: embedded index.html missing: " + err.Error())
	}
	meta := `<meta name="` + name + `" content="` + html.EscapeString(value) + `">` + "\n"
	return []byte(strings.Replace(string(page), "<title>", meta+"<title>", 1))
}

// headers locks the page down: its own scripts and styles only, no inline
// script, a WebSocket to the daemon that served it and nowhere else, never
// framed, never a Referer that could carry a URL.
func headers(h http.Header, host string) {
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "+
		"connect-src ws://"+host+"; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
}

// validHost admits a Host header that can go into the policy verbatim: a
// name or address and a port, nothing that could end a CSP directive.
func validHost(host string) bool {
	if host == "" || len(host) > 255 {
		return false
	}
	for _, r := range host {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(".-:[]", r)
		if !ok {
			return false
		}
	}
	return true
}
