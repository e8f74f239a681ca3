// Package testwait holds the one wait the tests use for what is eventual by
// nature — a notification between daemons, a reconnection, a heartbeat
// window — where no signal can be waited on instead. Only tests import it.
package testwait

import (
	"testing"
	"time"
)

// pollEvery is how often Eventually asks again.
const pollEvery = 2 * time.Millisecond

// Eventually polls cond until it holds, and fails t when it has not within
// limit, naming what it waited for.
func Eventually(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within %s", what, limit)
		}
		time.Sleep(pollEvery)
	}
}
