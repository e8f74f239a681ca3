// Package approvals is the vocabulary of human decisions about operations:
// a decision (approved or rejected) is keyed by a fingerprint of the
// operation (action type, tool and canonical parameters), so that the same
// operation in a later proposal is the same decision. The last decision
// for a fingerprint wins.
//
// The ledger that keeps the decisions durably, daemon-wide, is the store's
// (store.Approvals: a journal in store/file, a table in store/postgres);
// this package never imports the store or the journal.
package approvals
