package protocol

import (
	"encoding/json"
	"strconv"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
)

// DecodeProposalResult reads a proposal's result into r: in one walk over
// the bytes when r is zero and the result plain (members of the types they
// should have, not repeated, not spelt in another case), else as
// json.Unmarshal reads it. Either way numbers in outputs come out as
// float64. A reply holds one entry per action: this is most of what a
// client decodes. It is a function, not ProposalResult's UnmarshalJSON, so
// that a json.Decoder's own options (UseNumber, DisallowUnknownFields) still
// hold for the type.
func DecodeProposalResult(data []byte, r *ProposalResult) error {
	if r.isZero() {
		if fast, ok := decodeResultFast(data); ok {
			*r = *fast
			return nil
		}
	}
	return json.Unmarshal(data, r)
}

func (r *ProposalResult) isZero() bool {
	return r.ProposalID == "" && r.Results == nil && r.Cost == (CostSummary{}) && r.Replans == nil && r.ReplanError == "" && r.Warnings == nil
}

var (
	resultMembers       = []string{"proposal_id", "results", "cost", "replans", "replan_error", "warnings"}
	actionResultMembers = []string{"action_id", "status", "output", "error", "state_changes", "duration_ms", "timestamp", "cache_hit"}
	costMembers         = []string{"tool_calls", "actions_executed", "actions_rejected", "actions_skipped", "total_duration_ms", "retries", "budget"}
)

// decodeResultFast is ProposalResult's one-walk decoder; ok is false for
// anything it does not read plainly. What it returns is what encoding/json
// returns (a fuzz test holds the two together).
func decodeResultFast(data []byte) (*ProposalResult, bool) {
	if !jsonvalue.Valid(data) {
		return nil, false
	}
	d := &fastDecoder{b: data, floats: true}
	d.i = jsonvalue.SkipSpace(data, 0)
	if data[d.i] != '{' {
		return nil, false
	}
	r := &ProposalResult{}
	ok := d.object(resultMembers, nil, func(key string) bool {
		switch key {
		case "proposal_id":
			return d.plainString(&r.ProposalID)
		case "replan_error":
			return d.plainString(&r.ReplanError)
		case "replans":
			return d.viaDecoder(&r.Replans)
		case "warnings":
			return d.viaDecoder(&r.Warnings)
		case "cost":
			return d.cost(&r.Cost)
		case "results":
			if d.null() {
				r.Results = nil
				return true
			}
			if d.b[d.i] != '[' {
				return false
			}
			r.Results = make([]ActionResult, 0, d.count())
			if d.names == nil {
				d.names = map[string]string{}
			}
			return d.array(func() bool {
				var ar ActionResult
				ok := d.actionResult(&ar)
				r.Results = append(r.Results, ar)
				return ok
			})
		}
		return false
	})
	return r, ok
}

func (d *fastDecoder) actionResult(ar *ActionResult) bool {
	d.i = jsonvalue.SkipSpace(d.b, d.i)
	if d.b[d.i] != '{' {
		return false
	}
	return d.object(actionResultMembers, nil, func(key string) bool {
		switch key {
		case "action_id":
			return d.plainString(&ar.ActionID)
		case "status":
			var s string
			ok := d.name(&s) // a handful of values, repeated
			ar.Status = ActionStatus(s)
			return ok
		case "cache_hit":
			return d.name(&ar.CacheHit)
		case "timestamp":
			return d.plainString(&ar.Timestamp)
		case "error":
			return d.optString(&ar.Error)
		case "duration_ms":
			return d.float(&ar.DurationMs)
		case "state_changes":
			return d.optObject(&ar.StateChanges)
		case "output":
			p := valueParser{keys: d.names, floats: true}
			ar.Output, d.i = p.parse(d.b, d.i)
			return !p.bad
		}
		return false
	})
}

func (d *fastDecoder) cost(c *CostSummary) bool {
	if d.null() {
		return true
	}
	if d.b[d.i] != '{' {
		return false
	}
	return d.object(costMembers, nil, func(key string) bool {
		switch key {
		case "tool_calls":
			return d.int(&c.ToolCalls)
		case "actions_executed":
			return d.int(&c.ActionsExecuted)
		case "actions_rejected":
			return d.int(&c.ActionsRejected)
		case "actions_skipped":
			return d.int(&c.ActionsSkipped)
		case "retries":
			return d.int(&c.Retries)
		case "total_duration_ms":
			return d.float(&c.TotalDurationMs)
		case "budget":
			return d.viaDecoder(&c.Budget)
		}
		return false
	})
}

// number is the number token at the cursor, or nil for null; ok is false
// for anything else.
func (d *fastDecoder) number() (tok []byte, ok bool) {
	if d.null() {
		return nil, true
	}
	end := d.i
	for end < len(d.b) && isNumberByte(d.b[end]) {
		end++
	}
	if end == d.i {
		return nil, false
	}
	tok, d.i = d.b[d.i:end], end
	return tok, true
}

// int reads an integer into an int field (null leaves it).
func (d *fastDecoder) int(n *int) bool {
	tok, ok := d.number()
	if !ok || tok == nil {
		return ok
	}
	v, err := strconv.ParseInt(string(tok), 10, 64)
	*n = int(v)
	return err == nil
}

// float reads a number into a float64 field (null leaves it).
func (d *fastDecoder) float(f *float64) bool {
	tok, ok := d.number()
	if !ok || tok == nil {
		return ok
	}
	v, err := strconv.ParseFloat(string(tok), 64)
	*f = v
	return err == nil
}

// viaDecoder reads the value at the cursor with encoding/json: members
// rare enough not to need a walk of their own.
func (d *fastDecoder) viaDecoder(v any) bool {
	end := jsonvalue.SkipValue(d.b, d.i)
	if json.Unmarshal(d.b[d.i:end], v) != nil {
		return false
	}
	d.i = end
	return true
}
