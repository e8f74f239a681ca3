package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/parslee-ai/car-server/protocol"
)

// Replanning over the wire: replan.set_config sets this connection's loop,
// and the loop asks this connection for each replacement with a
// replan.propose request.

// Bounds of replan.set_config, so that one proposal.submit stays bounded.
const (
	maxReplansLimit = 32
	maxReplanDelay  = 60_000 // delay_ms
)

const replanShape = "{max_replans: integer 0..32, delay_ms?: integer 0..60000, verify_before_execute?: boolean, replan_on_rejected?: boolean}"

func (c *conn) replanSetConfig(_ context.Context, params *json.RawMessage) (any, error) {
	var p protocol.ReplanConfig
	if err := decodeKnownParams(params, &p, replanShape); err != nil {
		return nil, err
	}
	if p.MaxReplans < 0 || p.MaxReplans > maxReplansLimit {
		return nil, invalidParams("param 'max_replans' must be between 0 and %d, got %d", maxReplansLimit, p.MaxReplans)
	}
	if p.DelayMs > maxReplanDelay {
		return nil, invalidParams("param 'delay_ms' must be at most %d, got %d", maxReplanDelay, p.DelayMs)
	}
	c.replan.Store(&p)
	return nil, nil
}

// Replan implements engine.Replanner with a replan.propose request to this
// connection, answered within the tool timeout. When the daemon gives up
// (timeout, proposal.cancel, shutdown) the client is told with tools.cancel
// carrying the request_id, as for tools.execute.
func (c *conn) Replan(ctx context.Context, req protocol.ReplanProposeParams) (*protocol.ActionProposal, error) {
	<-c.ready
	timeout := c.srv.opts.ToolTimeout
	ctx, cancel := context.WithTimeoutCause(ctx, timeout,
		fmt.Errorf("replan.propose got no answer within %s (the tool timeout); the results are the last attempt's", timeout))
	defer cancel()
	id := "cb-" + strconv.FormatUint(c.callbackSeq.Add(1), 10)
	req.RequestID = id
	w, err := c.rpc.DispatchCall(ctx, protocol.MethodReplanPropose, req, jsonrpc2.PickID(jsonrpc2.ID{Str: id, IsString: true}))
	if err != nil {
		return nil, fmt.Errorf("replan.propose: could not reach the client: %v", disconnectText(err))
	}
	var raw json.RawMessage
	err = w.Wait(ctx, &raw)
	switch {
	case err == nil:
	case errors.Is(err, jsonrpc2.ErrClosed) || errors.Is(context.Cause(ctx), errDisconnected):
		return nil, fmt.Errorf("replan.propose: the client disconnected before answering (request %s)", id)
	case ctx.Err() != nil:
		reason := context.Cause(ctx).Error()
		c.sendCancel(protocol.ToolCancelParams{RequestID: id, Reason: reason})
		c.abandon(id)
		return nil, errors.New(reason)
	default:
		var rerr *jsonrpc2.Error
		if errors.As(err, &rerr) {
			return nil, fmt.Errorf("replan.propose: the client answered with an error: %s", rerr.Message)
		}
		return nil, fmt.Errorf("replan.propose: %v", err)
	}
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	prop, err := c.decodeProposal(raw)
	if err != nil {
		return nil, fmt.Errorf("replan.propose must be answered with an ActionProposal or null: %v", err)
	}
	return prop, nil
}
