// Package auditlog is the format of the durable event log of one daemon
// and what proves it: the lines of its segment files (events, signed heads,
// signed retention records), the daemon's Ed25519 audit key, the file
// that holds the newest signed head, and the offline verification that
// `car-server audit verify` runs over a directory of segments.
//
// It writes nothing but the key and the head file: the file store
// (internal/store/file: events.go) appends the segments through the
// journal's group commit. It never imports the engine; the caller of
// Verify hands it the check of an event's hash.
package auditlog
