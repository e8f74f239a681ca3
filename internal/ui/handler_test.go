package ui

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func TestEveryAssetCarriesTheSecurityHeaders(t *testing.T) {
	h := Handler(Options{})
	for _, path := range []string{"/ui/", "/ui/app.js", "/ui/style.css"} {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Host = "127.0.0.1:9100"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: status %d", path, rec.Code)
		}
		csp := rec.Header().Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "script-src 'self';", "connect-src ws://127.0.0.1:9100;", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Fatalf("%s: CSP %q lacks %q", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Fatalf("%s: CSP allows inline script: %q", path, csp)
		}
		if rec.Header().Get("X-Frame-Options") != "DENY" || rec.Header().Get("Referrer-Policy") != "no-referrer" {
			t.Fatalf("%s: headers %v", path, rec.Header())
		}
	}
}

func TestAHostThatWouldBreakThePolicyIsRefused(t *testing.T) {
	req := httptest.NewRequest(http.MethodGet, "/ui/", nil)
	req.Host = "evil; script-src *"
	rec := httptest.NewRecorder()
	Handler(Options{}).ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest || rec.Header().Get("Content-Security-Policy") != "" {
		t.Fatalf("status %d, CSP %q", rec.Code, rec.Header().Get("Content-Security-Policy"))
	}
}

func TestTheAssetsHoldNoInlineScriptOrHTMLInsertion(t *testing.T) {
	page, err := assets.ReadFile("assets/index.html")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(page), "<script>") || regexp.MustCompile(`\son[a-z]+=`).Match(page) {
		t.Fatal("index.html has inline script")
	}
	entries, err := assets.ReadDir("assets")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".js") {
			continue
		}
		src, err := assets.ReadFile("assets/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		// The SVG namespace is a name, not a fetch.
		src = []byte(strings.ReplaceAll(string(src), "'http://www.w3.org/2000/svg'", ""))
		for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "localStorage.setItem", "http://", "https://"} {
			if strings.Contains(string(src), bad) {
				t.Fatalf("%s uses %s", e.Name(), bad)
			}
		}
	}
}

func TestThePageCarriesTheTraceLinkTemplateEscaped(t *testing.T) {
	const tmpl = `http://127.0.0.1:16686/trace/{trace_id}?a="><script>x</script>`
	for _, path := range []string{"/ui/", "/ui/index.html"} {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Host = "127.0.0.1:9100"
		rec := httptest.NewRecorder()
		Handler(Options{TraceURL: tmpl}).ServeHTTP(rec, req)
		body := rec.Body.String()
		want := `<meta name="car-trace-url" content="http://127.0.0.1:16686/trace/{trace_id}?a=&#34;&gt;&lt;script&gt;x&lt;/script&gt;">`
		if rec.Code != http.StatusOK || !strings.Contains(body, want) || strings.Contains(body, "<script>x") || rec.Header().Get("Content-Security-Policy") == "" {
			t.Fatalf("%s: status %d, CSP %q, page:\n%s", path, rec.Code, rec.Header().Get("Content-Security-Policy"), body)
		}
	}
	req := httptest.NewRequest(http.MethodGet, "/ui/", nil)
	req.Host = "127.0.0.1:9100"
	rec := httptest.NewRecorder()
	Handler(Options{}).ServeHTTP(rec, req)
	if strings.Contains(rec.Body.String(), "car-trace-url") {
		t.Fatal("a page without a template names one")
	}
}
