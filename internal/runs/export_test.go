package runs

// What store_test.go (package runs_test, which runs the Store over the
// file store's log) reads of the package's own.
var TurnsOf = turnsOf

const (
	TruncatedMark = truncatedMark
	TurnOverMark  = turnOverMark
)
