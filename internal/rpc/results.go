package rpc

import (
	"encoding/json"
	"strconv"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/parslee-ai/car-server/internal/bufpool"
	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/protocol"
)

// replyBuffers hold encoded replies until the stream has written them.
var replyBuffers = bufpool.New(4096, 256<<10)

// sendResult sends result as resp's result. A proposal's result, which has
// one entry per action, is encoded by hand (appendProposalResult) into a
// pooled buffer: the stream has written it when send returns.
func sendResult(resp *jsonrpc2.Response, result any, send func(*jsonrpc2.Response) error) error {
	pr, ok := result.(*protocol.ProposalResult)
	if !ok || pr == nil {
		if err := resp.SetResult(result); err != nil {
			return err
		}
		return send(resp)
	}
	bp := replyBuffers.Get()
	defer replyBuffers.Put(bp)
	b, err := appendProposalResult(*bp, pr)
	*bp = b
	if err != nil {
		return err
	}
	raw := json.RawMessage(b)
	resp.Result = &raw
	return send(resp)
}

// appendProposalResult encodes a proposal's result byte for byte as
// json.Marshal does.
func appendProposalResult(b []byte, r *protocol.ProposalResult) ([]byte, error) {
	var err error
	b = append(b, `{"proposal_id":`...)
	b = jsonvalue.AppendString(b, r.ProposalID)
	b = append(b, `,"results":`...)
	if r.Results == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Results {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendActionResult(b, &r.Results[i]); err != nil {
				return b, err
			}
		}
		b = append(b, ']')
	}
	c := &r.Cost
	b = append(b, `,"cost":{"tool_calls":`...)
	b = strconv.AppendInt(b, int64(c.ToolCalls), 10)
	b = append(b, `,"actions_executed":`...)
	b = strconv.AppendInt(b, int64(c.ActionsExecuted), 10)
	b = append(b, `,"actions_rejected":`...)
	b = strconv.AppendInt(b, int64(c.ActionsRejected), 10)
	b = append(b, `,"actions_skipped":`...)
	b = strconv.AppendInt(b, int64(c.ActionsSkipped), 10)
	b = append(b, `,"total_duration_ms":`...)
	if b, err = jsonvalue.AppendFloat(b, c.TotalDurationMs); err != nil {
		return b, err
	}
	b = append(b, `,"retries":`...)
	b = strconv.AppendInt(b, int64(c.Retries), 10)
	if c.Budget != nil {
		b = append(b, `,"budget":`...)
		if b, err = jsonvalue.Append(b, c.Budget); err != nil {
			return b, err
		}
	}
	b = append(b, '}')
	if len(r.Replans) > 0 {
		b = append(b, `,"replans":`...)
		if b, err = jsonvalue.Append(b, r.Replans); err != nil {
			return b, err
		}
	}
	if r.ReplanError != "" {
		b = append(b, `,"replan_error":`...)
		b = jsonvalue.AppendString(b, r.ReplanError)
	}
	if len(r.Warnings) > 0 {
		b = append(b, `,"warnings":[`...)
		for i, w := range r.Warnings {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonvalue.AppendString(b, w)
		}
		b = append(b, ']')
	}
	return append(b, '}'), nil
}

func appendActionResult(b []byte, r *protocol.ActionResult) ([]byte, error) {
	var err error
	b = append(b, `{"action_id":`...)
	b = jsonvalue.AppendString(b, r.ActionID)
	b = append(b, `,"status":`...)
	b = jsonvalue.AppendString(b, string(r.Status))
	b = append(b, `,"output":`...)
	if b, err = jsonvalue.Append(b, r.Output); err != nil {
		return b, err
	}
	b = append(b, `,"error":`...)
	if r.Error == nil {
		b = append(b, "null"...)
	} else {
		b = jsonvalue.AppendString(b, *r.Error)
	}
	b = append(b, `,"state_changes":`...)
	if b, err = jsonvalue.Append(b, r.StateChanges); err != nil {
		return b, err
	}
	b = append(b, `,"duration_ms":`...)
	if b, err = jsonvalue.AppendFloat(b, r.DurationMs); err != nil {
		return b, err
	}
	b = append(b, `,"timestamp":`...)
	b = jsonvalue.AppendString(b, r.Timestamp)
	if r.CacheHit != "" {
		b = append(b, `,"cache_hit":`...)
		b = jsonvalue.AppendString(b, r.CacheHit)
	}
	return append(b, '}'), nil
}
