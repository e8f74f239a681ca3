package wsstream

import (
	"encoding/json"
	"testing"

	"github.com/sourcegraph/jsonrpc2"
)

func TestNegativeIDsTravelThroughTheLibraryAndBack(t *testing.T) {
	cases := []struct {
		id     string
		lifted bool
	}{
		{"-7", true},
		{"-9223372036854775808", true},
		{" -3 ", true},
		{"7", false},
		{`"-7"`, false},
		{"-9223372036854775809", false},
		{"-1.5", false},
		{"null", false},
	}
	for _, tc := range cases {
		t.Run(tc.id, func(t *testing.T) {
			marked, ok := LiftID(json.RawMessage(tc.id))
			if ok != tc.lifted {
				t.Fatalf("lifted %v, want %v", ok, tc.lifted)
			}
			if !ok {
				return
			}
			var req jsonrpc2.Request
			if err := json.Unmarshal([]byte(`{"jsonrpc":"2.0","method":"m","id":`+string(marked)+`}`), &req); err != nil {
				t.Fatalf("the library cannot hold the lifted id: %v", err)
			}
			resp, err := json.Marshal(&jsonrpc2.Response{ID: req.ID, Result: &json.RawMessage{'1'}})
			if err != nil {
				t.Fatal(err)
			}
			var back struct {
				ID json.RawMessage `json:"id"`
			}
			if err := json.Unmarshal(lowerNegativeID(resp), &back); err != nil {
				t.Fatal(err)
			}
			var want json.RawMessage
			if err := json.Unmarshal([]byte(tc.id), &want); err != nil {
				t.Fatal(err)
			}
			if string(back.ID) != string(want) {
				t.Fatalf("the reply's id is %s, want %s", back.ID, want)
			}
		})
	}
}
