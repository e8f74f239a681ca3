package tracing

import (
	"net/url"
	"strings"
)

// TraceIDPlaceholder is what a trace link template names the trace id by.
const TraceIDPlaceholder = "{trace_id}"

// MaxTraceURLBytes bounds the trace link template: it is sent with every
// dashboard page.
const MaxTraceURLBytes = 2048

// CheckTraceURL returns what is wrong with a trace link template
// (otel_trace_url), or nil; empty is no link. A template is an absolute
// http or https URL naming {trace_id}, such as
// http://127.0.0.1:16686/trace/{trace_id}.
func CheckTraceURL(tmpl string) error {
	if tmpl == "" {
		return nil
	}
	const key = "otel_trace_url"
	if len(tmpl) > MaxTraceURLBytes {
		return bad(key, "otel_trace_url is %d bytes: give a link template of at most %d bytes", len(tmpl), MaxTraceURLBytes)
	}
	if !strings.Contains(tmpl, TraceIDPlaceholder) {
		return bad(key, "otel_trace_url is %q: it must name the trace id as {trace_id}, as in http://127.0.0.1:16686/trace/{trace_id}", tmpl)
	}
	u, err := url.Parse(strings.ReplaceAll(tmpl, TraceIDPlaceholder, "4bf92f3577b34da6a3ce929d0e0e4736"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return bad(key, "otel_trace_url is %q: give an absolute http or https URL, as in http://127.0.0.1:16686/trace/{trace_id}", tmpl)
	}
	return nil
}
