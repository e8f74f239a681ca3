package host

import (
	"errors"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/internal/store/storetest"
)

// The operation a gate approval decides stays typed beside the row, here
// and on another daemon, where it is read back once from the context the
// row arrived with, trimmed or not. Nothing a client raises is taken for
// one, whatever its context says.
func TestAGateApprovalKeepsItsOperationHereAndOnAnotherDaemon(t *testing.T) {
	bus := storetest.NewBus()
	a, b := joined(t, "a", bus, Options{}), joined(t, "b", bus, Options{})
	onA := subscribe(t, a, "dash-a", true)
	op := Operation{Fingerprint: "0123456789abcdef0123456789abcdef", RequiredTier: "full_access"}

	if _, err := b.RaiseGate(ApprovalRequest{Title: "t"}, Operation{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a gate approval without its operation: %v", err)
	}
	req := ApprovalRequest{Title: "tool 'deploy' needs full_access", Context: map[string]any{"preview": map[string]any{"script": strings.Repeat("y", 20_000)}}}
	ap, err := b.RaiseGate(req, op)
	if err != nil {
		t.Fatal(err)
	}
	if req.Context["fingerprint"] != nil {
		t.Fatal("RaiseGate wrote into the caller's context")
	}
	if ap.Context["source"] != "permission_gate" || ap.Context["fingerprint"] != op.Fingerprint || ap.Context["required_tier"] != op.RequiredTier {
		t.Fatalf("a person does not see the operation: %+v", ap.Context)
	}
	if _, got, ok := b.Gate(ap.ID); !ok || got != op {
		t.Fatalf("B's operation of its own row: %+v %v", got, ok)
	}
	onA.next(t, KindApprovalRequested)
	if m, got, ok := a.Gate(ap.ID); !ok || got != op || m.Context["preview"] != nil {
		t.Fatalf("A's operation of B's trimmed row: %+v %v (context %+v)", got, ok, m.Context)
	}

	sys, err := b.RaiseSystem(ApprovalRequest{Title: "ws.method:mail.send"})
	if err != nil {
		t.Fatal(err)
	}
	forged, err := b.RequestApproval("agent-conn", ApprovalRequest{Title: "may I?", Context: map[string]any{"source": "permission_gate", "fingerprint": op.Fingerprint, "required_tier": "full_access"}})
	if err != nil {
		t.Fatal(err)
	}
	onA.next(t, KindApprovalRequested)
	onA.next(t, KindApprovalRequested)
	for _, r := range []*Registry{a, b} {
		for _, id := range []string{sys.ID, forged.ID} {
			if _, got, ok := r.Gate(id); !ok || got != (Operation{}) {
				t.Fatalf("approval %s taken for a gate's: %+v %v", id, got, ok)
			}
		}
	}
}

// An evicted gate approval takes its operation with it.
func TestAnEvictedGateApprovalForgetsItsOperation(t *testing.T) {
	r := New(Options{MaxApprovals: 1})
	first, err := r.RaiseGate(ApprovalRequest{Title: "t"}, Operation{Fingerprint: "f", RequiredTier: "full_access"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Expire(first.ID, "nobody decided"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.RaiseSystem(ApprovalRequest{Title: "u"}); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := r.Gate(first.ID); ok || len(r.gates) != 0 {
		t.Fatalf("after eviction: kept %v, %d operations", ok, len(r.gates))
	}
}
