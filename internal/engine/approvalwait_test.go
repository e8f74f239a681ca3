package engine

import (
	"strings"
	"testing"
)

// TestAProposalPutsAtMostItsBoundToAPerson: the tally counts distinct
// operations over every park of one proposal, and a park that would pass
// the bound is refused whole, counting none of it.
func TestAProposalPutsAtMostItsBoundToAPerson(t *testing.T) {
	var tally approvalTally
	if err := tally.add([]string{"f1", "f2"}, 3); err != nil {
		t.Fatal(err)
	}
	if err := tally.add([]string{"f2", "f3"}, 3); err != nil {
		t.Fatalf("f2 again is not a new operation: %v", err)
	}
	err := tally.add([]string{"f4", "f5"}, 3)
	if err == nil || !strings.Contains(err.Error(), "would put 5 distinct operations") || !strings.Contains(err.Error(), "max_approvals_per_proposal (3)") {
		t.Fatalf("past the bound: %v", err)
	}
	if err := tally.add([]string{"f1"}, 3); err != nil || len(tally.raised) != 3 {
		t.Fatalf("the refused park counted: %v, %d raised", err, len(tally.raised))
	}
}
