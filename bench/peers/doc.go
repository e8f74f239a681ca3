// Command peers measures a durable step of car-server beside the
// durable-execution engines a user would pick instead, in one run, on one
// machine: a sequential chain of trivial steps, each executed by the
// caller's own process, in interleaved rounds, reporting the median of the
// rounds and their spread.
//
// It is a module of its own so that the peers' dependencies never reach
// car-server's go.mod. car-server is measured through car-bench
// --durable-chain (plain and durable on the file store in one run, durable
// on the PostgreSQL store in another), DBOS Transact in this process on
// SQLite and on the same PostgreSQL, and Temporal through temporal-peer
// (./temporal, a module of its own built with a newer Go toolchain, run as
// a subprocess that keeps its server between rounds). See BENCHMARKS.md,
// *Durable steps beside the peers*.
package main
