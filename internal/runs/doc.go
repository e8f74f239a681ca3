// Package runs owns agent run traces: a run is one runs.start /
// runs.complete bracket around an agent loop, its turns appended in order
// and kept on disk under <root>/<agent_id>/<run_id>.jsonl, one record a
// line, through the journal's durability rules (fsync before the ack, a
// torn tail cut off, interior corruption refused).
//
// The store owns the turn index, bounds what lands on disk (caps.go), and
// hands each appended record to the run's subscribers in order: a snapshot
// and the subscription that follows it are taken under the one lock the
// appender publishes under, so nothing is missed or delivered twice.
// Subscribers' push functions must not block (a fanout queue's Push).
//
// The engine records a proposal's tool calls as turns through a Recorder,
// the same append path runs.record_turns takes. The package never imports
// a transport.
package runs
