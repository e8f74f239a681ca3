// Package storetest is what tests need of the store seam.
//
// Run is the conformance suite: it exercises every interface of package
// store (the approval ledger, idempotency claims and results, the messaging
// ledger, state, the run log, agent tokens and postures, the event log, the
// bus, the member list, the supervisor registry) with the same assertions
// for every backend, including writes that race on one key, each with one
// defined outcome. Each backend runs it from a test of its own package
// (store/file in every make test, store/postgres wherever PostgreSQL is),
// passing how it opens a daemon and, in Options, the parts it has not and
// where it differs from the others on purpose, each with its reason.
//
// Bus, Events and Supervisors are in-memory stand-ins for parts of the seam,
// for tests that stand several daemons up in one process: each part is
// shared by the daemons' runtimes as the database would be.
//
// StartRun, PromptTurns, ListRuns and CloseRunsOnCleanup drive a
// runs.Store over whichever log it is given, for the Store's own tests and
// the file store's run-file tests.
//
// It imports package store and nothing of a backend, so each backend's
// tests can import it.
package storetest
