package rpc

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

// proposal.submit's params are split in one walk when they are plain; what
// the split takes, it reads as decodeParams does.
func TestSubmitParamsSplitAsDecoded(t *testing.T) {
	for _, tc := range []struct {
		params string
		split  bool
	}{
		{`{"proposal":{"actions":[]}}`, true},
		{` { "proposal" : {"actions":[{"id":"a"}]} , "session_id" : "s1" , "scope" : {"tenantId":"t","claims":{"k":1}} , "extra" : [1] } `, true},
		{`{"proposal":null}`, true},
		{`{"scope":null,"proposal":{}}`, true},
		{`{}`, false},
		{`{"session_id":"s"}`, false},
		{`{"Proposal":{}}`, false},
		{`{"proposal":{},"proposal":{}}`, false},
		{`{"proposal":{},"session_id":5}`, false},
		{`{"proposal":{},"session_id":null}`, false},
		{`{"proposal":{},"session_id":"\u0041"}`, false},
		{`{"proposal":{},"scope":[1]}`, false},
		{`{"pr\u006fposal":{}}`, false},
		{`[1]`, false},
		{`null`, false},
	} {
		raw := json.RawMessage(tc.params)
		got, ok := splitSubmit(&raw)
		if ok != tc.split {
			t.Errorf("%s: split %v, want %v", tc.params, ok, tc.split)
			continue
		}
		if !ok {
			continue
		}
		var want protocol.SubmitParams
		if err := decodeParams(&raw, &want, submitShape); err != nil {
			t.Fatalf("%s: %v", tc.params, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n split   %+v\n decoded %+v", tc.params, got, want)
		}
	}
}
