// Package metrics holds the daemon's Prometheus collectors, registered in
// one registry that GET /metrics serves. Packages record into them directly;
// this package imports nothing of the daemon.
package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Registry is what /metrics exposes.
var Registry = prometheus.NewRegistry()

var (
	// Connections is the number of open WebSocket connections.
	Connections = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "car_connections", Help: "Open WebSocket connections.",
	})
	// Requests counts client requests by method and JSON-RPC error code (0: success).
	Requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "car_requests_total", Help: "Client requests by method and JSON-RPC error code (0 for success).",
	}, []string{"method", "code"})
	// Proposals counts submitted proposals.
	Proposals = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "car_proposals_total", Help: "Proposals submitted.",
	})
	// Actions counts finished actions by status.
	Actions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "car_actions_total", Help: "Actions by final status.",
	}, []string{"status"})
	// GateDecisions counts admission gate and policy outcomes.
	GateDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "car_gate_decisions_total", Help: "Gate decisions: gate (permission, supervision, policy, …) and decision.",
	}, []string{"gate", "decision"})
	// CallbackSeconds is the latency of tools.execute callbacks, by outcome.
	CallbackSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "car_callback_seconds", Help: "tools.execute round trips to clients, by outcome.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
	}, []string{"outcome"})
	// FsyncSeconds is the latency of journal fsyncs.
	FsyncSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "car_journal_fsync_seconds", Help: "Journal write+fsync latency per group commit.",
		Buckets: prometheus.ExponentialBuckets(0.00005, 4, 10),
	})
	// JournalCompactionFailures counts failed journal compactions, by the
	// journal's file name (one per journal the daemon keeps).
	JournalCompactionFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "car_journal_compaction_failures_total", Help: "Journal compactions that failed, by journal file name.",
	}, []string{"journal"})
)

func init() {
	Registry.MustRegister(Connections, Requests, Proposals, Actions, GateDecisions, CallbackSeconds, FsyncSeconds, JournalCompactionFailures,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}

// Code is a JSON-RPC code as a label.
func Code(code int64) string { return strconv.FormatInt(code, 10) }
