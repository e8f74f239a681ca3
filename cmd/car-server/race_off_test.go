//go:build !race

package main

// raceEnabled: these tests run without the race detector, and so does the
// daemon they start.
const raceEnabled = false
