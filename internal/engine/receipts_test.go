package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

// searchExecutor returns three hits for search, an empty list for lookup
// and a plain string for anything else.
type searchExecutor struct{}

func (searchExecutor) ExecuteTool(_ context.Context, call ToolCall) (any, error) {
	switch call.Tool {
	case "search":
		return map[string]any{"results": []any{"a", "b", "c"}}, nil
	case "lookup":
		return []any{}, nil
	}
	return "done", nil
}

func claim(tool string) protocol.ToolClaim { return protocol.ToolClaim{Tool: tool} }

func withCount(c protocol.ToolClaim, n int) protocol.ToolClaim {
	c.ResultCount = &n
	return c
}

func TestReceiptVerdicts(t *testing.T) {
	rt, s := openRuntime(t, Options{}, searchExecutor{}, "search", "lookup", "note")
	submitAs(t, rt, s, "p1", call("s", "search", nil), call("l", "lookup", nil), call("n", "note", nil))
	nothing := claim("search")
	nothing.FoundNothing = true
	emptyLookup := claim("lookup")
	emptyLookup.FoundNothing = true
	contains := claim("note")
	contains.OutputContains = "done"
	byAction := claim("search")
	byAction.ActionID = "nope"
	claims := []protocol.ToolClaim{withCount(claim("search"), 3), withCount(claim("search"), 5), nothing, emptyLookup, claim("send_email"), byAction, contains, claim("note")}
	want := []string{protocol.VerdictGrounded, protocol.VerdictMisstatedResultCount, protocol.VerdictFalseNegative, protocol.VerdictGrounded,
		protocol.VerdictFabricatedToolReference, protocol.VerdictFabricatedToolReference, protocol.VerdictUngroundable, protocol.VerdictGrounded}
	rep, err := rt.VerifyReceipts(ctxT(t), claims, "p1", s.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range rep.Claims {
		if v.Verdict != want[i] {
			t.Fatalf("claim %d %+v: %s (%s), want %s", i, claims[i], v.Verdict, v.Detail, want[i])
		}
	}
	if rep.Grounded || len(rep.Ungroundable) != 1 || !strings.Contains(rep.Claims[1].Detail, "shows 3") {
		t.Fatalf("%+v", rep)
	}
	ev := rt.Events.Query(EventQuery{Kinds: []EventKind{EventToolReceiptHallucination}})
	if len(ev) != 1 || ev[0].ProposalID != "p1" {
		t.Fatalf("hallucination events %+v", ev)
	}
	// Scoped: another proposal's receipts do not ground a claim.
	submitAs(t, rt, s, "p2", call("n", "note", nil))
	rep, _ = rt.VerifyReceipts(ctxT(t), []protocol.ToolClaim{claim("search")}, "p2", s.ID)
	if rep.Claims[0].Verdict != protocol.VerdictFabricatedToolReference {
		t.Fatalf("scoped: %+v", rep.Claims[0])
	}
	// Unscoped, absence cannot be proven.
	rep, _ = rt.VerifyReceipts(ctxT(t), []protocol.ToolClaim{claim("send_email"), withCount(claim("search"), 3)}, "", s.ID)
	if rep.Claims[0].Verdict != protocol.VerdictUngroundable || rep.Claims[1].Verdict != protocol.VerdictGrounded || !rep.Grounded {
		t.Fatalf("unscoped: %+v", rep)
	}
}

func TestReceiptsAfterEvictionAreUngroundable(t *testing.T) {
	rt, s := openRuntime(t, Options{EventCapacity: 4}, searchExecutor{}, "search", "note")
	submitAs(t, rt, s, "p1", call("s", "search", nil), call("n", "note", nil))
	rep, err := rt.VerifyReceipts(ctxT(t), []protocol.ToolClaim{claim("send_email")}, "p1", s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Claims[0].Verdict != protocol.VerdictUngroundable || !strings.Contains(rep.Claims[0].Detail, "proposal_received event is no longer in the log") {
		t.Fatalf("%+v", rep.Claims[0])
	}
}

func TestReceiptClaimsAreBounded(t *testing.T) {
	rt, s := openRuntime(t, Options{IntegrityOptions: IntegrityOptions{MaxReceiptClaims: 2}}, searchExecutor{}, "search")
	if _, err := rt.VerifyReceipts(ctxT(t), []protocol.ToolClaim{claim("a"), claim("b"), claim("c")}, "", s.ID); err == nil || !strings.Contains(err.Error(), "max_receipt_claims") {
		t.Fatalf("over: %v", err)
	}
	if _, err := rt.VerifyReceipts(ctxT(t), []protocol.ToolClaim{claim("a"), claim("b")}, "", s.ID); err != nil {
		t.Fatalf("at: %v", err)
	}
	for _, bad := range []protocol.ToolClaim{{}, withCount(claim("a"), -1)} {
		if _, err := rt.VerifyReceipts(ctxT(t), []protocol.ToolClaim{bad}, "", s.ID); err == nil || !strings.Contains(err.Error(), "claims[0].") {
			t.Fatalf("%+v: %v", bad, err)
		}
	}
}
