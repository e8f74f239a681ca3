// Package engine is the Runtime the daemon hosts: the shared state store, the
// per-connection sessions with their tool registries, the proposal
// executor, the event log and the admission gates.
//
// The engine never imports a transport, nor a store backend: engine.Options
// takes its state and stores (store's interfaces) from the caller, and a
// nil one turns its feature off. Tools run through the ToolExecutor
// interface, which the rpc package implements with tools.execute callbacks,
// and replacements for a failed proposal come through Replanner
// (replan.propose).
package engine
