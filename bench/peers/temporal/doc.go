// Command temporal-peer is the Temporal row of bench/peers: a Temporal
// server in this process, on the SQLite development configuration backed by
// a file that `temporal server start-dev --db-filename` uses, a worker, and
// a workflow that runs a sequential chain of trivial activities.
//
// It is a module of its own because go.temporal.io/server needs a newer Go
// than car-server's; bench/peers builds it with GOTOOLCHAIN (see its
// go.mod's toolchain line) and drives it as a subprocess over a line
// protocol, so that its rounds interleave with the other systems':
//
//	stdout, once started and warmed up:
//	  ready journal_mode=<mode> synchronous=<0-3>
//	stdin "measure" → stdout: step_ns <mean nanoseconds per step of --chains chains of --steps activities>
//	stdin closed → the worker and the server stop, and it exits
//
// Everything else (errors only) goes to stderr. --transfer-poll-rps sets
// history.transferProcessorMaxPollRPS, which start-dev leaves at 20: with
// one history shard it paces every task the shard hands to matching, so a
// chain's step waits for it.
package main
