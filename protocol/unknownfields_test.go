package protocol

import (
	"fmt"
	"strings"
	"testing"
)

func TestSuggestField(t *testing.T) {
	for name, want := range map[string]string{
		"depends_on":   "dependencies",
		"dependancies": "dependencies",
		"paramaters":   "parameters",
		"params":       "parameters",
		"Tool":         "tool",
		"timeout":      "timeout_ms",
		"retries":      "max_retries",
		"idempotnt":    "idempotent",
		"zebra":        "",
		"x-vendor":     "",
	} {
		if got := suggestField(name, actionMembers); got != want {
			t.Errorf("%q: suggested %q, want %q", name, got, want)
		}
	}
}

// However many unknown fields a proposal has, it gets at most
// MaxFieldWarnings lines and one that counts the rest, whichever decoder
// read it.
func TestFieldWarningsAreBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"actions":[`)
	for i := range 500 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"a%d","type":"state_read","depends_on":[]}`, i)
	}
	b.WriteString(`]}`)
	fast, ok := decodeProposalFast([]byte(b.String()))
	if !ok {
		t.Fatal("the fast decoder declined a plain proposal")
	}
	slow, err := decodeProposalReflect([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*ActionProposal{fast, slow} {
		w := p.FieldWarnings
		if len(w) != MaxFieldWarnings+1 || w[MaxFieldWarnings] != "480 more unknown fields are not listed" {
			t.Fatalf("%d warnings, last %q", len(w), w[len(w)-1])
		}
	}
}
