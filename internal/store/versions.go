package store

import "context"

// VersionReader is a State that can tell the version of the write that
// stored a key's value: state.get {with_version} and the transaction
// check's stale-read test use it. Both backends implement it.
type VersionReader interface {
	// GetVersioned returns the value at key and its version; ok is false
	// (and the version 0) when the key does not exist.
	GetVersioned(ctx context.Context, tenant, key string) (value any, version uint64, ok bool, err error)
}
