// Package idempotency is what makes two idempotent tool calls the same
// call: Key hashes the tenant, the tool and either the canonical JSON of
// the resolved parameters or an explicit key the caller chose
// (metadata.idempotency_key). The engine looks results up by it in the
// store's idempotency cache (store.Idempotency: a journal in store/file, a
// table with claims in store/postgres); this package never imports the
// store or the journal.
package idempotency
