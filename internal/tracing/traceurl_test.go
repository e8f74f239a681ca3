package tracing

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckTraceURL(t *testing.T) {
	for _, ok := range []string{"", "http://127.0.0.1:16686/trace/{trace_id}", "https://tempo.example/explore?trace={trace_id}&x=1"} {
		if err := CheckTraceURL(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for tmpl, want := range map[string]string{
		"http://127.0.0.1:16686/trace/":                                "{trace_id}",
		"javascript:alert(1)//{trace_id}":                              "absolute http or https URL",
		"/trace/{trace_id}":                                            "absolute http or https URL",
		"http://127.0.0.1/" + strings.Repeat("x", 2048) + "{trace_id}": "at most 2048 bytes",
	} {
		err := CheckTraceURL(tmpl)
		var se *SettingError
		if !errors.As(err, &se) || se.Key != "otel_trace_url" || !strings.Contains(err.Error(), want) {
			t.Errorf("%.40q: %v, want a SettingError of otel_trace_url saying %q", tmpl, err, want)
		}
	}
}
