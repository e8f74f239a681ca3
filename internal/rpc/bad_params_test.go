package rpc

import (
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

// Params of the host, runs, agents and metrics methods that are out of range
// get -32602 saying what is wrong.
func TestOutOfRangeParamsAreRefusedClearly(t *testing.T) {
	rs := startRunsServer(t, runsSetup{})
	host := rs.hostClient(t)
	for _, tc := range []struct {
		name, method string
		params       any
		want         string
	}{
		{"error rate above 1", protocol.MethodMetricsAlerts, map[string]any{"max_error_rate": 1.5}, "'max_error_rate' must be between 0 and 1"},
		{"error rate below 0", protocol.MethodMetricsAlerts, map[string]any{"max_error_rate": -0.1}, "'max_error_rate' must be between 0 and 1"},
		{"negative event limit", protocol.MethodHostEvents, map[string]any{"limit": -1}, "'limit' must be 0 or more"},
		{"negative trace cursor", protocol.MethodRunsGetTrace, map[string]any{"run_id": "r1", "cursor": -1}, "'cursor' must be 0 or more"},
		{"agent name without letters", protocol.MethodRunsStart, map[string]any{"intent": "x", "agent_name": "!!! ---"}, "has no letters or digits"},
		{"evaluate without a tier", protocol.MethodAgentPermissionsEvaluate, map[string]any{"agent_id": "a"}, "param 'tier' is required"},
		{"evaluate with an unknown tier", protocol.MethodAgentPermissionsEvaluate, map[string]any{"agent_id": "a", "tier": "root"}, "root"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, msg := rpcCode(t, host.Call(ctxT(t), tc.method, tc.params, nil))
			if code != protocol.CodeInvalidParams || !strings.Contains(msg, tc.want) {
				t.Fatalf("%s %v: %d %q, want -32602 with %q", tc.method, tc.params, code, msg, tc.want)
			}
		})
	}

}
