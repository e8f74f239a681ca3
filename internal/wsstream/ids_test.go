package wsstream

import (
	"encoding/json"
	"testing"

	"github.com/sourcegraph/jsonrpc2"
)

func TestNegativeIDsTravelThroughTheLibraryAndBack(t *testing.T) {
	cases := []struct {
		name, in string
		lifted   bool
	}{
		{"negative id", `{"jsonrpc":"2.0","id":-7,"method":"m"}`, true},
		{"most negative", `{"jsonrpc":"2.0","id":-9223372036854775808,"method":"m"}`, true},
		{"positive id", `{"jsonrpc":"2.0","id":7,"method":"m"}`, false},
		{"string id", `{"jsonrpc":"2.0","id":"-7","method":"m"}`, false},
		{"negative number in params only", `{"jsonrpc":"2.0","id":3,"method":"m","params":{"x":{"id":-1}}}`, false},
		{"past int64", `{"jsonrpc":"2.0","id":-9223372036854775809,"method":"m"}`, false},
		{"not JSON", `{"id":-1,`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := liftNegativeID([]byte(tc.in))
			if lifted := string(out) != tc.in; lifted != tc.lifted {
				t.Fatalf("lifted %v, want %v: %s", lifted, tc.lifted, out)
			}
			if !tc.lifted {
				return
			}
			var req jsonrpc2.Request
			if err := json.Unmarshal(out, &req); err != nil {
				t.Fatalf("the library cannot decode the lifted frame: %v", err)
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
			var orig struct {
				ID json.RawMessage `json:"id"`
			}
			if err := json.Unmarshal([]byte(tc.in), &orig); err != nil {
				t.Fatal(err)
			}
			if string(back.ID) != string(orig.ID) {
				t.Fatalf("the reply's id is %s, want %s", back.ID, orig.ID)
			}
		})
	}
}
