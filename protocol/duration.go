package protocol

import (
	"math"
	"time"
)

// The IR counts time in seconds (float) and milliseconds (integer); these
// turn them into durations without overflow. A value past what a Duration
// holds (about 292 years) saturates to the longest Duration, so a huge TTL
// or interval means "practically forever", never a negative duration.

// Seconds converts s seconds to a Duration, saturating; a negative or NaN
// value is zero.
func Seconds(s float64) time.Duration {
	switch {
	case math.IsNaN(s) || s <= 0:
		return 0
	case s >= float64(math.MaxInt64)/float64(time.Second):
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(s * float64(time.Second))
}

// Millis converts ms milliseconds to a Duration, saturating.
func Millis(ms uint64) time.Duration {
	if ms > uint64(math.MaxInt64/int64(time.Millisecond)) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(ms) * time.Millisecond
}
