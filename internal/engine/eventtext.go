package engine

import (
	"errors"
	"strings"
)

// redactedError is an error whose message quotes a value of the caller's
// (a parameter, an output, a state value). Error is the whole message, for
// the caller's own reply; Redacted is the same message without the value,
// for the event log every connection may query.
type redactedError interface {
	error
	Redacted() string
}

// LoggedError is err's text as the shared event log records it: a value
// quoted by err or by an error it wraps is left out (a schema violation
// names its paths and keywords only); any other error is its text.
func LoggedError(err error) string {
	text := err.Error()
	var r redactedError
	if !errors.As(err, &r) {
		return text
	}
	if full := r.Error(); strings.Contains(text, full) {
		return strings.Replace(text, full, r.Redacted(), 1)
	}
	return r.Redacted()
}

// valueError is a message that quotes a value, with its redacted form.
type valueError struct {
	full, redacted string
}

func (e *valueError) Error() string    { return e.full }
func (e *valueError) Redacted() string { return e.redacted }
