package engine

import (
	"testing"

	"github.com/parslee-ai/car-server/internal/store/storetest"
	"github.com/parslee-ai/car-server/protocol"
)

// TestGoalVerdictsFoldAcrossACluster: goal_evaluated events two daemons
// appended are counted from the shared log's stored JSON, as a restarted
// daemon or another daemon of the cluster reads them, and the alert fires.
func TestGoalVerdictsFoldAcrossACluster(t *testing.T) {
	shared := storetest.NewEvents(nil)
	a, b := joined(t, shared, "a", 0), joined(t, shared, "b", 0)
	verdict := func(met, grounded bool) Event {
		return Event{Kind: EventGoalEvaluated, Data: map[string]any{"goal": "g", "met": met, "grounded": grounded, "iteration": int64(1)}}
	}
	a.Append(verdict(true, false))
	b.Append(verdict(true, true))
	b.Append(verdict(false, true))
	a.Append(Event{Kind: EventTurnCompleted, Data: map[string]any{"decision": "accepted", "was_truncated": true}})

	most := 0
	s, alerts, err := joined(t, shared, "c", 0).AlertsAll(ctxT(t), AlertThresholds{MaxGoalsUngrounded: &most})
	if err != nil {
		t.Fatal(err)
	}
	if s.GoalEvaluations != 3 || s.GoalsMet != 2 || s.GoalsUngrounded != 1 {
		t.Fatalf("cluster summary goals %d/%d/%d, want 3 evaluations, 2 met, 1 ungrounded", s.GoalEvaluations, s.GoalsMet, s.GoalsUngrounded)
	}
	if len(alerts) != 1 || alerts[0].Kind != "goal_ungrounded" {
		t.Fatalf("alerts %+v", alerts)
	}
	if s := a.Summary(); s.GoalEvaluations != 1 || s.GoalsUngrounded != 1 {
		t.Fatalf("daemon a alone counts its own: %+v", s)
	}
}

// TestGroundedIsWhetherTheVerdictDependsOnAnUnderivableCheck: combine's
// rule against every assignment of the underivable leaves.
func TestGroundedIsWhetherTheVerdictDependsOnAnUnderivableCheck(t *testing.T) {
	rt, _ := openRuntime(t, Options{}, nil)
	judge := protocol.GoalCondition{Type: protocol.GoalModelJudge}
	holds := protocol.GoalCondition{Type: protocol.GoalStatePredicate, Key: "k", Operator: "not_exists"}
	fails := protocol.GoalCondition{Type: protocol.GoalStatePredicate, Key: "k", Operator: "exists"}
	for _, c := range []struct {
		name          string
		g             protocol.GoalCondition
		met, grounded bool
	}{
		{"judge alone", judge, false, false},
		{"all of: holds and judge", protocol.GoalCondition{Type: protocol.GoalAllOf, Conditions: []protocol.GoalCondition{holds, judge}}, false, false},
		{"all of: fails and judge", protocol.GoalCondition{Type: protocol.GoalAllOf, Conditions: []protocol.GoalCondition{fails, judge}}, false, true},
		{"any of: holds and judge", protocol.GoalCondition{Type: protocol.GoalAnyOf, Conditions: []protocol.GoalCondition{judge, holds}}, true, true},
		{"any of: fails and judge", protocol.GoalCondition{Type: protocol.GoalAnyOf, Conditions: []protocol.GoalCondition{fails, judge}}, false, false},
		{"nested: any of (all of (holds, judge), holds)", protocol.GoalCondition{Type: protocol.GoalAnyOf, Conditions: []protocol.GoalCondition{
			{Type: protocol.GoalAllOf, Conditions: []protocol.GoalCondition{holds, judge}}, holds}}, true, true},
		{"nested: all of (any of (fails, judge), holds)", protocol.GoalCondition{Type: protocol.GoalAllOf, Conditions: []protocol.GoalCondition{
			{Type: protocol.GoalAnyOf, Conditions: []protocol.GoalCondition{fails, judge}}, holds}}, false, false},
	} {
		res, err := rt.EvaluateGoal(ctxT(t), &c.g, GoalInput{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if res.Met != c.met || res.Grounded != c.grounded {
			t.Errorf("%s: met %v grounded %v, want %v %v (%s)", c.name, res.Met, res.Grounded, c.met, c.grounded, res.Reason)
		}
	}
}
