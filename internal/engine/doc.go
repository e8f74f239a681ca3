// Package engine is the Runtime the daemon hosts: the shared state store, the
// per-connection sessions with their tool registries, and (as it grows) the
// proposal executor, event log and admission gates.
//
// The engine never imports a transport. Tools run through the ToolExecutor
// interface, which the rpc package implements with tools.execute callbacks,
// and replacements for a failed proposal come through Replanner
// (replan.propose).
package engine
