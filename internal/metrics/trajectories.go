package metrics

import "github.com/prometheus/client_golang/prometheus"

// TrajectoryWriteFailures counts dispatched attempts the trajectory store
// could not record; the action itself is unaffected.
var TrajectoryWriteFailures = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "car_trajectory_write_failures_total", Help: "Dispatched tool attempts the trajectory store could not record.",
})

func init() { Registry.MustRegister(TrajectoryWriteFailures) }
