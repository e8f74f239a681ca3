package metrics

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestCode(t *testing.T) {
	cases := []struct {
		code int64
		want string
	}{
		{0, "0"},
		{-32601, "-32601"},
		{-32000, "-32000"},
		{-32700, "-32700"},
		{42, "42"},
	}
	for _, tc := range cases {
		if got := Code(tc.code); got != tc.want {
			t.Errorf("Code(%d) = %q, want %q", tc.code, got, tc.want)
		}
	}
}

// TestCollectors pins each exported collector's name, type and label names:
// dashboards and alerts are written against them.
func TestCollectors(t *testing.T) {
	// One child per vector, so each family has a metric to show its labels.
	Requests.WithLabelValues("state.get", Code(0)).Inc()
	Actions.WithLabelValues("succeeded").Inc()
	GateDecisions.WithLabelValues("policy", "deny").Inc()
	CallbackSeconds.WithLabelValues("ok").Observe(0.01)
	FsyncSeconds.Observe(0.001)
	Connections.Set(2)
	Proposals.Inc()
	GoalsEvaluated.WithLabelValues(GoalOutcome(true, false)).Inc()
	TurnsCompleted.WithLabelValues("false").Inc()

	type family struct {
		name   string
		typ    string
		labels []string // sorted, as the exposition orders them
	}
	want := []family{
		{"car_connections", "GAUGE", nil},
		{"car_requests_total", "COUNTER", []string{"code", "method"}},
		{"car_proposals_total", "COUNTER", nil},
		{"car_actions_total", "COUNTER", []string{"status"}},
		{"car_gate_decisions_total", "COUNTER", []string{"decision", "gate"}},
		{"car_callback_seconds", "HISTOGRAM", []string{"outcome"}},
		{"car_journal_fsync_seconds", "HISTOGRAM", nil},
		{"car_trajectory_write_failures_total", "COUNTER", nil},
		{"car_goals_evaluated_total", "COUNTER", []string{"outcome"}},
		{"car_turns_completed_total", "COUNTER", []string{"truncated"}},
	}
	families, err := Registry.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	seen := map[string]bool{}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "car_") {
			continue
		}
		seen[f.GetName()] = true
		i := slices.IndexFunc(want, func(w family) bool { return w.name == f.GetName() })
		if i < 0 {
			t.Errorf("registry serves %s, which this test does not know: add it here", f.GetName())
			continue
		}
		w := want[i]
		if got := f.GetType().String(); got != w.typ {
			t.Errorf("%s is a %s, want %s", w.name, got, w.typ)
		}
		for _, m := range f.GetMetric() {
			var names []string
			for _, l := range m.GetLabel() {
				names = append(names, l.GetName())
			}
			if !slices.Equal(names, w.labels) {
				t.Errorf("%s labels = %v, want %v", w.name, names, w.labels)
			}
		}
	}
	for _, w := range want {
		if !seen[w.name] {
			t.Errorf("%s is not registered in Registry", w.name)
		}
	}
}

func TestRequestsExposition(t *testing.T) {
	Requests.Reset()
	t.Cleanup(Requests.Reset)
	Requests.WithLabelValues("proposal.submit", Code(0)).Add(2)
	Requests.WithLabelValues("unknown", Code(-32601)).Inc()
	const want = `
# HELP car_requests_total Client requests by method and JSON-RPC error code (0 for success).
# TYPE car_requests_total counter
car_requests_total{code="-32601",method="unknown"} 1
car_requests_total{code="0",method="proposal.submit"} 2
`
	if err := testutil.CollectAndCompare(Requests, strings.NewReader(want), "car_requests_total"); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(Requests.WithLabelValues("proposal.submit", "0")); got != 2 {
		t.Fatalf("proposal.submit successes = %v, want 2", got)
	}
}

func TestRegistryLint(t *testing.T) {
	problems, err := testutil.GatherAndLint(Registry,
		"car_connections", "car_requests_total", "car_proposals_total", "car_actions_total",
		"car_gate_decisions_total", "car_callback_seconds", "car_journal_fsync_seconds",
		"car_goals_evaluated_total", "car_turns_completed_total")
	if err != nil {
		t.Fatalf("lint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

func TestGoalOutcomeNamesEachVerdict(t *testing.T) {
	for _, c := range []struct {
		met, grounded bool
		want          string
	}{{false, false, "not_met"}, {false, true, "not_met"}, {true, true, "met_grounded"}, {true, false, "met_ungrounded"}} {
		if got := GoalOutcome(c.met, c.grounded); got != c.want {
			t.Errorf("GoalOutcome(%v, %v) = %s, want %s", c.met, c.grounded, got, c.want)
		}
	}
}
