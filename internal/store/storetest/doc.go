// Package storetest holds in-memory implementations of parts of the store
// seam for tests that stand several daemons up in one process: each part is
// shared by the daemons' runtimes as the database would be.
package storetest
