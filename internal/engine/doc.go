// Package engine is the Runtime the daemon hosts: the per-connection
// sessions with their tool registries, the proposal executor, the
// admission gates and per-action checks that decide what may run, the
// event log, and shared state through the store seam (Options.State).
//
// Runtime.Execute (replan.go) is the entry point of a proposal: it runs
// one attempt with Submit (proposal.go), which builds the dependency graph
// (scheduler.go), passes the proposal through the gates (policy sessions,
// capabilities, information flow, permissions with the approvals that wait
// for a person, supervision) and schedules the admitted actions in
// run.execute; each action runs in run.runAction (action.go). With
// replanning configured, Execute asks for replacements after a failure.
//
// The engine never imports a transport, nor a store backend: engine.Options
// takes its state and stores (store's interfaces) from the caller, and a
// nil one turns its feature off. Tools run through the ToolExecutor
// interface, which the rpc package implements with tools.execute callbacks,
// and replacements for a failed proposal come through Replanner
// (replan.propose).
package engine
