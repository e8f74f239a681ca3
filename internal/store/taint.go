package store

import "github.com/parslee-ai/car-server/protocol"

// Taint keeps the intent gate's taint ledger durably: which state keys
// untrusted data reached. The engine holds the copy it reads; Load gives it
// what an earlier run left, Put and Delete write each change through.
type Taint interface {
	// Load returns every tainted key, by tenant.
	Load() map[string]map[string]protocol.TaintEntry
	// Put records entries of tenant (a key already tainted is replaced).
	Put(tenant string, entries []protocol.TaintEntry) error
	// Delete clears keys of tenant; a key that is not tainted is skipped.
	Delete(tenant string, keys []string) error
}
