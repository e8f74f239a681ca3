package metrics

import "github.com/prometheus/client_golang/prometheus"

var (
	// GoalsEvaluated counts goal_evaluated events (goals.record) by outcome:
	// met_grounded, met_ungrounded or not_met.
	GoalsEvaluated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "car_goals_evaluated_total", Help: "Goal verifier verdicts recorded (goals.record), by outcome: met_grounded, met_ungrounded or not_met.",
	}, []string{"outcome"})
	// TurnsCompleted counts turn_completed events (turns.record_completed)
	// by whether the last reply was truncated.
	TurnsCompleted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "car_turns_completed_total", Help: "Turn-loop completion decisions recorded (turns.record_completed), by whether the last reply was truncated.",
	}, []string{"truncated"})
)

// GoalOutcome is a goal verdict as GoalsEvaluated's label.
func GoalOutcome(met, grounded bool) string {
	switch {
	case !met:
		return "not_met"
	case grounded:
		return "met_grounded"
	}
	return "met_ungrounded"
}

func init() { Registry.MustRegister(GoalsEvaluated, TurnsCompleted) }
