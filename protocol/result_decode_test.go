package protocol

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// sameResultAsDecoder fails when the one-walk decoder takes a result and
// reads it differently from encoding/json.
func sameResultAsDecoder(t *testing.T, data []byte) (fast bool) {
	t.Helper()
	got, ok := decodeResultFast(data)
	if !ok {
		return false
	}
	type plain ProposalResult
	var want plain
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatalf("%s: the fast decoder took a result encoding/json refuses: %v", data, err)
	}
	if !reflect.DeepEqual(*got, ProposalResult(want)) {
		t.Fatalf("%s:\n fast    %#v\n decoder %#v", data, *got, want)
	}
	return true
}

var resultSeeds = []string{
	`{"proposal_id":"p","results":[],"cost":{"tool_calls":0,"actions_executed":0,"actions_rejected":0,"actions_skipped":0,"total_duration_ms":0,"retries":0}}`,
	`{"proposal_id":"p1","results":[{"action_id":"a","status":"succeeded","output":{"ok":true,"n":1.5,"l":[1,"x",null]},"error":null,"state_changes":{},"duration_ms":0.123,"timestamp":"2026-11-30T00:00:00Z"},{"action_id":"b","status":"failed","output":null,"error":"boom \u003c","state_changes":null,"duration_ms":1e-7,"timestamp":"t","cache_hit":"result"}],"cost":{"tool_calls":2,"actions_executed":2,"actions_rejected":0,"actions_skipped":0,"total_duration_ms":12.5,"retries":1,"budget":{"limits":{},"spent":{},"exceeded":"usd"}},"replans":[{"attempt":1,"proposal_id":"p2","outcome":"failed"}],"replan_error":"gave up"}`,
	` { "results" : null , "cost" : null , "extra" : [1,{"a":2}] } `,
	`{"results":[{"output":12345678901234567890,"status":"succeeded"}]}`,
	// Left to encoding/json:
	`{"results":[{"output":1e400}]}`,
	`{"results":[null]}`,
	`{"results":[{"Status":"x"}]}`,
	`{"results":[{"status":"a","status":"b"}]}`,
	`{"cost":{"tool_calls":1.5}}`,
	`{"cost":{"tool_calls":"1"}}`,
	`{"proposal_id":5}`,
	`{"results":{}}`,
	`[]`,
}

func TestResultDecodeMatchesDecoder(t *testing.T) {
	for i, s := range resultSeeds {
		if got, want := sameResultAsDecoder(t, []byte(s)), i < 4; got != want {
			t.Errorf("%s: read in one walk %v, want %v", s, got, want)
		}
	}
	// Through DecodeProposalResult: the fast walk, and encoding/json for the rest.
	for _, s := range resultSeeds[:5] {
		var r, want ProposalResult
		err := DecodeProposalResult([]byte(s), &r)
		wantErr := json.Unmarshal([]byte(s), &want)
		if (err != nil) != (wantErr != nil) || (err == nil && !reflect.DeepEqual(r, want)) {
			t.Errorf("%s: %v %+v, want %v %+v", s, err, r, wantErr, want)
		}
	}
	// Into a result that already holds something, encoding/json merges.
	r := ProposalResult{ProposalID: "kept", ReplanError: "kept too"}
	if err := DecodeProposalResult([]byte(`{"proposal_id":"new"}`), &r); err != nil || r.ProposalID != "new" || r.ReplanError != "kept too" {
		t.Errorf("decode into a non-zero result: %v %+v", err, r)
	}
}

// A json.Decoder's options hold for ProposalResult: it has no UnmarshalJSON
// of its own that would read past them.
func TestResultKeepsDecoderOptions(t *testing.T) {
	var r ProposalResult
	dec := json.NewDecoder(strings.NewReader(`{"results":[{"output":{"id":9007199254740993}}],"bogus":1}`))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err == nil || !strings.Contains(err.Error(), `unknown field "bogus"`) {
		t.Fatalf("DisallowUnknownFields: %v", err)
	}
	dec = json.NewDecoder(strings.NewReader(`{"results":[{"output":{"id":9007199254740993}}]}`))
	dec.UseNumber()
	r = ProposalResult{}
	if err := dec.Decode(&r); err != nil || r.Results[0].Output.(map[string]any)["id"] != json.Number("9007199254740993") {
		t.Fatalf("UseNumber: %v %#v", err, r.Results)
	}
}

func FuzzResultDecode(f *testing.F) {
	for _, s := range resultSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sameResultAsDecoder(t, data)
	})
}
