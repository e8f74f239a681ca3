// Package allocs measures what a piece of work allocates, for the tests that
// hold the daemon's bounds on hostile input: bytes, not time, so that they
// hold on any machine.
package allocs

import "runtime"

// Bytes is the heap memory f allocates (runtime.MemStats.TotalAlloc).
func Bytes(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
