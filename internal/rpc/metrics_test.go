package rpc

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

// scrape returns the value of one series from GET /metrics (0 when absent).
func scrape(t *testing.T, ts *testServer, series string) float64 {
	t.Helper()
	resp, err := http.Get("http" + strings.TrimPrefix(ts.url, "ws") + "metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read /metrics: %v", err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` ([0-9.e+-]+)$`).FindSubmatch(body)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatalf("%s: %v", series, err)
	}
	return v
}

func TestMetricsMoveAfterAProposal(t *testing.T) {
	ts := startServer(t, Options{})
	series := []string{
		`car_proposals_total`,
		`car_actions_total{status="succeeded"}`,
		`car_actions_total{status="rejected"}`,
		`car_requests_total{code="0",method="proposal.submit"}`,
		`car_requests_total{code="-32601",method="unknown"}`,
		`car_callback_seconds_count{outcome="ok"}`,
		`car_gate_decisions_total{decision="allow",gate="permission"}`,
	}
	before := map[string]float64{}
	for _, s := range series {
		before[s] = scrape(t, ts, s)
	}
	tb := newToolbox(t, ts, map[string]toolFunc{"echo": echo})
	tb.submit(t, proposal(toolCall("a", "echo", nil), toolCall("b", "missing_tool", nil)))
	if code, _ := rpcCode(t, tb.Call(ctxT(t), "no.such.method", nil, nil)); code != protocol.CodeMethodNotFound {
		t.Fatalf("an unknown method answered %d", code)
	}
	want := map[string]float64{
		`car_proposals_total`: 1, `car_actions_total{status="succeeded"}`: 1, `car_actions_total{status="rejected"}`: 1,
		`car_requests_total{code="0",method="proposal.submit"}`: 1, `car_requests_total{code="-32601",method="unknown"}`: 1,
		`car_callback_seconds_count{outcome="ok"}`: 1, `car_gate_decisions_total{decision="allow",gate="permission"}`: 2,
	}
	for _, s := range series {
		if got := scrape(t, ts, s) - before[s]; got != want[s] {
			t.Errorf("%s moved by %v, want %v", s, got, want[s])
		}
	}
	if scrape(t, ts, "car_connections") < 1 {
		t.Error("car_connections does not count the open connection")
	}
}
