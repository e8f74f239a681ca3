package protocol

import (
	"encoding/json"
	"testing"
)

// TestRawKeepsTheBytesItWasSent: a Raw member decodes and encodes as
// json.RawMessage does, null included, and a missing one stays nil.
func TestRawKeepsTheBytesItWasSent(t *testing.T) {
	for _, in := range []string{`{"proposal":{"actions": [1, 2]}}`, `{"proposal":null}`, `{"proposal":"x"}`, `{}`} {
		var raw struct {
			Proposal json.RawMessage `json:"proposal"`
		}
		var typed ProposalParams
		if err := json.Unmarshal([]byte(in), &raw); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(in), &typed); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if string(typed.Proposal) != string(raw.Proposal) || (typed.Proposal == nil) != (raw.Proposal == nil) {
			t.Errorf("%s: Raw kept %q, json.RawMessage %q", in, typed.Proposal, raw.Proposal)
		}
		a, errA := json.Marshal(raw)
		b, errB := json.Marshal(typed)
		if errA != nil || errB != nil || string(a) != string(b) {
			t.Errorf("%s: Raw encodes as %s (%v), json.RawMessage as %s (%v)", in, b, errB, a, errA)
		}
	}
}
