package engine

import (
	"context"
	"fmt"

	"github.com/parslee-ai/car-server/protocol"
)

// Tool receipts: a model's claims about the tool calls it made, checked
// against the daemon's own events (action_succeeded and action_failed of
// tool calls), never against what the model says. Each succeeded tool
// call's event carries result_count when its output is a list (or an object
// with a list under results, items, matches or data), a count and never a
// value.

// EventToolReceiptHallucination records a report with a claim the receipts
// contradict.
const EventToolReceiptHallucination EventKind = "tool_receipt_hallucination"

// DefaultMaxReceiptClaims bounds the claims of one receipts.verify.
const DefaultMaxReceiptClaims = 256

// resultCount is the number of results an output holds, when it is a list
// or an object holding one under a usual name.
func resultCount(output any) (int, bool) {
	switch v := output.(type) {
	case []any:
		return len(v), true
	case map[string]any:
		for _, k := range []string{"results", "items", "matches", "data"} {
			if l, ok := v[k].([]any); ok {
				return len(l), true
			}
		}
	}
	return 0, false
}

// receipt is one tool call as the event log has it.
type receipt struct {
	actionID  string
	succeeded bool
	count     int
	counted   bool
}

// VerifyReceipts judges claims against the receipts of the proposal
// proposalID ("": every retained receipt). A claim the window cannot judge
// (its proposal's proposal_received event is gone, or no proposal was
// named, and no receipt matches) is ungroundable, not fabricated.
func (rt *Runtime) VerifyReceipts(ctx context.Context, claims []protocol.ToolClaim, proposalID, connection string) (*protocol.ReceiptReport, error) {
	if len(claims) == 0 {
		return nil, fmt.Errorf("claims: give at least one claim ({tool, action_id?, result_count?, found_nothing?, output_contains?})")
	}
	if len(claims) > rt.opts.MaxReceiptClaims {
		return nil, &LimitError{Msg: fmt.Sprintf("claims: %d claims; at most %d are checked at once (max_receipt_claims): check them in parts", len(claims), rt.opts.MaxReceiptClaims)}
	}
	for i, c := range claims {
		if c.Tool == "" {
			return nil, fmt.Errorf("claims[%d].tool: name the tool the claim is about", i)
		}
		if c.ResultCount != nil && *c.ResultCount < 0 {
			return nil, fmt.Errorf("claims[%d].result_count: must not be negative", i)
		}
	}
	q := EventQuery{Kinds: []EventKind{EventProposalReceived, EventActionSucceeded, EventActionFailed}, ProposalID: proposalID}
	events, truncated, err := rt.Events.QueryAll(ctx, q)
	if err != nil {
		return nil, err
	}
	complete := false
	byTool := map[string][]receipt{}
	for _, e := range events {
		if e.Kind == EventProposalReceived {
			complete = proposalID != "" && e.ProposalID == proposalID && !truncated
			continue
		}
		tool, _ := e.Data["tool"].(string)
		if tool == "" {
			continue
		}
		r := receipt{actionID: e.ActionID, succeeded: e.Kind == EventActionSucceeded}
		switch n := e.Data["result_count"].(type) {
		case int:
			r.count, r.counted = n, true
		case float64:
			r.count, r.counted = int(n), true
		}
		byTool[tool] = append(byTool[tool], r)
	}
	rep := &protocol.ReceiptReport{Grounded: true, Claims: make([]protocol.ClaimVerdict, len(claims)), Ungroundable: []protocol.ToolClaim{}}
	for i, c := range claims {
		v := judgeClaim(c, byTool[c.Tool], complete, proposalID)
		rep.Claims[i] = v
		switch v.Verdict {
		case protocol.VerdictUngroundable:
			rep.Ungroundable = append(rep.Ungroundable, c)
		case protocol.VerdictGrounded:
		default:
			rep.Grounded = false
		}
	}
	if !rep.Grounded {
		verdicts := map[string]any{}
		for _, v := range rep.Claims {
			if v.Verdict != protocol.VerdictGrounded && v.Verdict != protocol.VerdictUngroundable {
				n, _ := verdicts[v.Verdict].(int)
				verdicts[v.Verdict] = n + 1
			}
		}
		rt.Events.Append(Event{Kind: EventToolReceiptHallucination, ProposalID: proposalID, Connection: connection, Data: map[string]any{"claims": len(claims), "verdicts": verdicts}})
	}
	return rep, nil
}

// judgeClaim is the verdict on one claim given the receipts of its tool.
func judgeClaim(c protocol.ToolClaim, rs []receipt, complete bool, proposalID string) protocol.ClaimVerdict {
	v := protocol.ClaimVerdict{Claim: c}
	if c.ActionID != "" {
		var mine []receipt
		for _, r := range rs {
			if r.actionID == c.ActionID {
				mine = append(mine, r)
			}
		}
		rs = mine
	}
	what := fmt.Sprintf("tool '%s'", c.Tool)
	if c.ActionID != "" {
		what += fmt.Sprintf(" as action '%s'", c.ActionID)
	}
	if len(rs) == 0 {
		if !complete {
			v.Verdict = protocol.VerdictUngroundable
			if proposalID == "" {
				v.Detail = fmt.Sprintf("no receipt of %s in the retained log, and without proposal_id the window cannot prove the call never happened", what)
			} else {
				v.Detail = fmt.Sprintf("no receipt of %s, and proposal %s's proposal_received event is no longer in the log: the window cannot prove absence", what, proposalID)
			}
			return v
		}
		v.Verdict = protocol.VerdictFabricatedToolReference
		v.Detail = fmt.Sprintf("proposal %s made no call to %s", proposalID, what)
		return v
	}
	var counted []receipt
	for _, r := range rs {
		if r.succeeded && r.counted {
			counted = append(counted, r)
		}
	}
	if c.ResultCount != nil || c.FoundNothing {
		if len(counted) == 0 {
			v.Verdict = protocol.VerdictUngroundable
			v.Detail = fmt.Sprintf("the receipts of %s record no result count (no succeeded call returned a list)", what)
			return v
		}
	}
	if c.FoundNothing {
		for _, r := range counted {
			if r.count > 0 {
				v.Verdict = protocol.VerdictFalseNegative
				v.Detail = fmt.Sprintf("the claim says %s found nothing; action '%s' returned %d results", what, r.actionID, r.count)
				return v
			}
		}
	}
	if c.ResultCount != nil {
		found := false
		for _, r := range counted {
			found = found || r.count == *c.ResultCount
		}
		if !found {
			v.Verdict = protocol.VerdictMisstatedResultCount
			v.Detail = fmt.Sprintf("the claim says %d results; the receipt of action '%s' shows %d", *c.ResultCount, counted[0].actionID, counted[0].count)
			return v
		}
	}
	if c.OutputContains != "" {
		v.Verdict = protocol.VerdictUngroundable
		v.Detail = fmt.Sprintf("%s ran, but the event log keeps counts, never output values: what its output contained cannot be checked", what)
		return v
	}
	v.Verdict = protocol.VerdictGrounded
	v.Detail = fmt.Sprintf("%d receipt(s) of %s", len(rs), what)
	return v
}
