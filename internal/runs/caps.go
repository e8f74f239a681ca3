package runs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// The daemon's size bounds: it never trusts a client's truncation for
// what lands on disk.
const (
	MaxFieldBytes = 16 * 1024  // a prompt, output or parameters string
	MaxTurnBytes  = 256 * 1024 // one persisted turn line
	MaxBatch      = 256        // turns per runs.record_turns
	MaxTurns      = 2000       // turns per run
)

// Markers that replace what the bounds cut.
const (
	truncatedMark = "…[truncated]"
	turnOverMark  = "…[truncated: turn exceeded 256 KiB]"
)

// indexReserve leaves room in MaxTurnBytes for the daemon's key, op and
// index stamp, so the persisted line stays within the cap at any index.
const indexReserve = 96

// wireTurn is a turn as a client sends it: index is ignored (the daemon
// owns it), so it is not decoded at all.
type wireTurn struct {
	Prompt          json.RawMessage `json:"prompt"`
	Tool            string          `json:"tool"`
	Parameters      json.RawMessage `json:"parameters"`
	Output          json.RawMessage `json:"output"`
	CliOutcome      json.RawMessage `json:"cli_outcome"`
	VerifierVerdict json.RawMessage `json:"verifier_verdict"`
	PolicyRejected  json.RawMessage `json:"policy_rejected"`
	Tokens          *Usage          `json:"tokens"`
}

// notRun is the verdict of a turn that carries none.
var notRun = json.RawMessage(`"not_run"`)

// DecodeTurns reads a runs.record_turns batch: a non-empty array of turn
// objects, at most MaxBatch. Any index a turn carries is ignored.
func DecodeTurns(raw json.RawMessage) ([]Turn, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || len(items) == 0 {
		return nil, errors.New("turns must be a non-empty array of RunTurn")
	}
	if len(items) > MaxBatch {
		return nil, fmt.Errorf("a batch holds at most %d turns, got %d: split it", MaxBatch, len(items))
	}
	turns := make([]Turn, len(items))
	for i, item := range items {
		var w wireTurn
		if bytes.TrimSpace(item)[0] != '{' || json.Unmarshal(item, &w) != nil {
			return nil, fmt.Errorf("turns[%d] is not a RunTurn object", i)
		}
		t := Turn{Tool: w.Tool, CliOutcome: nonNull(w.CliOutcome), VerifierVerdict: nonNull(w.VerifierVerdict), PolicyRejected: nonNull(w.PolicyRejected), Tokens: w.Tokens}
		var err error
		if t.Prompt, err = decodeAny(w.Prompt); err == nil {
			if t.Parameters, err = decodeAny(w.Parameters); err == nil {
				t.Output, err = decodeAny(w.Output)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("turns[%d]: %v", i, err)
		}
		turns[i] = t
	}
	return turns, nil
}

// nonNull drops an absent or null pass-through field.
func nonNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

// decodeAny decodes a free-form field, keeping numbers exact.
func decodeAny(raw json.RawMessage) (any, error) {
	if nonNull(raw) == nil {
		return nil, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// bound applies the size bounds to t: every string in its prompt,
// parameters and output is cut to MaxFieldBytes; a turn whose encoding is
// still over the cap has those three fields replaced by a marker; one that
// is over even then is refused (DropTurnTooLarge).
func bound(t *Turn) error {
	if t.VerifierVerdict == nil {
		t.VerifierVerdict = notRun
	}
	t.Prompt, t.Parameters, t.Output = cutStrings(t.Prompt), cutStrings(t.Parameters), cutStrings(t.Output)
	if fits(t) {
		return nil
	}
	t.Prompt, t.Parameters, t.Output = nilOr(t.Prompt), nilOr(t.Parameters), nilOr(t.Output)
	if fits(t) {
		return nil
	}
	return errors.New(DropTurnTooLarge)
}

// nilOr replaces a present field with the over-cap marker.
func nilOr(v any) any {
	if v == nil {
		return nil
	}
	return turnOverMark
}

// fits reports whether t's persisted line stays within MaxTurnBytes.
func fits(t *Turn) bool {
	b, err := json.Marshal(Record{Record: KindTurn, Turn: t})
	return err == nil && len(b)+indexReserve <= MaxTurnBytes
}

// cutStrings returns v with every string longer than MaxFieldBytes cut,
// at a rune boundary, and marked.
func cutStrings(v any) any {
	switch x := v.(type) {
	case string:
		if len(x) <= MaxFieldBytes {
			return x
		}
		cut := MaxFieldBytes
		for cut > 0 && x[cut]&0xC0 == 0x80 {
			cut--
		}
		return x[:cut] + truncatedMark
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = cutStrings(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cutStrings(e)
		}
		return out
	}
	return v
}
