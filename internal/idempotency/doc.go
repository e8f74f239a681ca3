// Package idempotency is what makes two idempotent tool calls the same
// call: Scope.Key hashes whose the call is (the principal: an agent, or
// the one plain principal every plain client shares), the tenant, the
// tool's name and SchemaDigest, and either the canonical JSON of the
// resolved parameters or an explicit key the caller chose
// (metadata.idempotency_key). Key is the older form, without principal or
// schema, under which results journaled by an older daemon are read back
// for plain clients. The engine looks results up in the store's
// idempotency cache (store.Idempotency: a journal in store/file, a table
// with claims in store/postgres); this package never imports the store or
// the journal.
package idempotency
