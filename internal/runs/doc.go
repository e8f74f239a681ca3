// Package runs owns agent run traces: a run is one runs.start /
// runs.complete bracket around an agent loop, its turns appended in order
// to a run log (Log, log.go: this package defines it, and the store's
// backends implement it; store.RunLog is the same interface). On one
// daemon that is store/file's: one journal per run under
// <root>/<agent_id>/<run_id>.jsonl, through the journal's durability rules
// (fsync before the ack, a torn tail cut off, interior corruption
// refused). On several daemons it is store/postgres's, which every daemon
// reads.
//
// The store owns the turn index (the log hands each append the run's
// counts under the run's lock), bounds what is recorded (caps.go), and
// hands each appended record to the run's subscribers on this daemon in
// order: a snapshot's extent and the subscription that follows it are
// taken under the one lock the appender publishes under, so nothing is
// missed or delivered twice. Subscribers' push functions must not block (a
// fanout queue's Push). A run in progress is subscribed to on the daemon
// its connection is on.
//
// The engine records a proposal's tool calls as turns through a Recorder,
// the same append path runs.record_turns takes. The package never imports
// a transport, the store or the journal.
package runs
