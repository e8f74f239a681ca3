package rpc

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// The integrity gates' methods: the connection's intent, the taint
// ledger, the transaction check mode and tool receipts.

const (
	intentSetShape  = "{intent: string, allowed_tools?: string[], forbidden_tools?: string[], forbidden_capabilities?: string[], untrusted_tools?: string[]}"
	taintListShape  = "{keys?: string[], tenant_id?: string}"
	taintClearShape = "{keys: string[], tenant_id?: string}"
	txCheckShape    = "{mode: \"off\" | \"warn\" | \"strict\"}"
	receiptsShape   = "{claims: [{tool, action_id?, result_count?, found_nothing?, output_contains?}], proposal_id?: string}"
)

// intentState is the reply of the session.intent.* methods.
func (c *conn) intentState() protocol.IntentState {
	return protocol.IntentState{Operator: c.srv.rt.OperatorIntent(), Session: c.sess.SessionIntent(), Capabilities: engine.IntentCapabilities}
}

// intentSet narrows this connection's intent: it can never allow what
// the operator's intent, or the connection's own, does not.
func (c *conn) intentSet(_ context.Context, params *json.RawMessage) (any, error) {
	var p protocol.IntentSetParams
	if err := decodeKnownParams(params, &p, intentSetShape); err != nil {
		return nil, err
	}
	if err := requireString("intent", p.Intent, intentSetShape); err != nil {
		return nil, err
	}
	in := &engine.WorkIntent{Intent: p.Intent, AllowedTools: p.AllowedTools, ForbiddenTools: p.ForbiddenTools, ForbiddenCapabilities: p.ForbiddenCapabilities, UntrustedTools: p.UntrustedTools}
	_, err := c.srv.rt.SetSessionIntent(c.sess, in)
	if errors.Is(err, engine.ErrIntentWidening) {
		return nil, rpcError(protocol.CodeApprovalDenied, "session.intent.set: %v: an intent only narrows; a wider one needs a new connection", err)
	}
	if err != nil {
		return nil, invalidParams("session.intent.set: %v", err)
	}
	return c.intentState(), nil
}

func (c *conn) intentGet(context.Context, *json.RawMessage) (any, error) {
	return c.intentState(), nil
}

// intentClear drops the connection's own intent: the host role only (the
// capability table), so an agent cannot shed the intent it was given.
func (c *conn) intentClear(context.Context, *json.RawMessage) (any, error) {
	c.sess.ClearSessionIntent()
	return c.intentState(), nil
}

func (c *conn) taintList(ctx context.Context, params *json.RawMessage) (any, error) {
	var p protocol.TaintListParams
	if err := optionalParams(params, &p, taintListShape); err != nil {
		return nil, err
	}
	if err := c.mayUseTenant(protocol.MethodTaintList, p.TenantID); err != nil {
		return nil, err
	}
	list, err := c.srv.rt.TaintList(ctx, p.TenantID, p.Keys)
	if err != nil {
		return nil, taintError(protocol.MethodTaintList, "nothing was read", err)
	}
	// Keys outside the connection's capability set are left out, as
	// state.keys leaves them out.
	caps := c.sess.Capabilities()
	visible := list[:0]
	for _, e := range list {
		if caps.AllowsKey(e.Key) == nil {
			visible = append(visible, e)
		}
	}
	return protocol.TaintListResult{Tainted: visible}, nil
}

func (c *conn) taintClear(ctx context.Context, params *json.RawMessage) (any, error) {
	var p protocol.TaintClearParams
	if err := decodeParams(params, &p, taintClearShape); err != nil {
		return nil, err
	}
	cleared, err := c.srv.rt.TaintClear(ctx, p.TenantID, p.Keys, c.sess.ID)
	if err != nil {
		return nil, taintError(protocol.MethodTaintClear, "no taint was cleared", err)
	}
	return protocol.TaintClearResult{Cleared: cleared}, nil
}

// taintError is a bad request for what the caller asked, a store error for
// a ledger that did not answer.
func taintError(method, outcome string, err error) *jsonrpc2.Error {
	if errors.Is(err, store.ErrUnavailable) {
		return storeError(method, outcome, err)
	}
	return invalidParams("%s: %v", method, err)
}

// transactionCheckSet sets this connection's mode. Anyone may make the
// check stricter than the daemon's transaction_check; only the host role
// may make it laxer.
func (c *conn) transactionCheckSet(_ context.Context, params *json.RawMessage) (any, error) {
	var p protocol.TransactionCheckParams
	if err := decodeParams(params, &p, txCheckShape); err != nil {
		return nil, err
	}
	mode, err := engine.ParseTransactionCheck(p.Mode)
	if err != nil {
		return nil, invalidParams("session.transaction_check.set: %v", err)
	}
	if def := c.srv.rt.DefaultTransactionCheck(); engine.TransactionCheckRank(mode) < engine.TransactionCheckRank(def) && !c.isHost() {
		return nil, rpcError(protocol.CodeApprovalDenied, "session.transaction_check.set: mode '%s' is laxer than this daemon's transaction_check '%s'; only the host role may lower it", mode, def)
	}
	c.sess.SetTransactionCheck(mode)
	return protocol.TransactionCheckParams{Mode: mode}, nil
}

func (c *conn) receiptsVerify(ctx context.Context, params *json.RawMessage) (any, error) {
	var p protocol.ReceiptsVerifyParams
	if err := decodeKnownParams(params, &p, receiptsShape); err != nil {
		return nil, err
	}
	rep, err := c.srv.rt.VerifyReceipts(ctx, p.Claims, p.ProposalID, c.sess.ID)
	if err != nil {
		return nil, invalidParams("receipts.verify: %v", err)
	}
	return rep, nil
}
