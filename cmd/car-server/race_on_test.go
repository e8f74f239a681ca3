//go:build race

package main

// raceEnabled: these tests run under the race detector, so the daemon they
// start is built with it too.
const raceEnabled = true
