package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// marshalHash is eventHash as json.Marshal writes its struct: the
// definition appendHashInput must match byte for byte.
func marshalHash(e *Event) string {
	b, _ := json.Marshal(struct {
		Seq        uint64         `json:"seq"`
		Kind       EventKind      `json:"kind"`
		Timestamp  string         `json:"timestamp"`
		ProposalID string         `json:"proposal_id"`
		ActionID   string         `json:"action_id"`
		Connection string         `json:"connection"`
		Data       map[string]any `json:"data"`
		PrevHash   string         `json:"prev_hash"`
		Node       string         `json:"node,omitempty"`
	}{e.Seq, e.Kind, e.Timestamp.Format(time.RFC3339Nano), e.ProposalID, e.ActionID, e.Connection, e.Data, e.PrevHash, e.Node})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func TestEventHashIsTheMarshalledStruct(t *testing.T) {
	type point struct {
		Y int `json:"y"`
		X int `json:"x"`
	}
	at := time.Date(2026, 12, 2, 1, 2, 3, 4500, time.UTC)
	for _, data := range []map[string]any{
		nil, {},
		{"tool": "echo", "duration_ms": 1.25, "n": 3, "ok": true, "none": nil},
		{"html": "<a href='x'>&amp;</a>", "ctl": "tab\there\nnl\x01", "uni": "é \u2028 😀", "bad": "\xff\xfe"},
		{"nested": map[string]any{"b": []any{1, "two", 3.5e21, map[string]any{"z": json.Number("12")}}, "a": []string{"x"}}},
		{"struct": point{Y: 1, X: 2}, "bools": map[string]bool{"t": true}},
	} {
		for _, node := range []string{"", "node-1"} {
			e := Event{Seq: 42, Kind: EventActionSucceeded, Timestamp: at, ProposalID: "p<1>", ActionID: "a\"1", Connection: "c", Data: data, PrevHash: "ab", Node: node}
			if got, want := eventHash(&e), marshalHash(&e); got != want {
				t.Errorf("data %v node %q: hash %s, the marshalled struct hashes to %s", data, node, got, want)
			}
			// The file store's record verifies from its body alone.
			raw := encodeData(&e)
			e.Hash = hashWith(&e, raw)
			r := rawRecord(&e, raw)
			if err := CheckRecord(&r); err != nil {
				t.Errorf("data %v: its record does not verify: %v", data, err)
			}
			var back Event
			if err := json.Unmarshal(r.Body, &back); err != nil || back.Seq != 42 || back.ActionID != e.ActionID || back.Hash != e.Hash {
				t.Errorf("its body decodes as %+v %v", back, err)
			}
			edited := r
			edited.Body = []byte(strings.Replace(string(r.Body), `"connection":"c"`, `"connection":"d"`, 1))
			if CheckRecord(&edited) == nil {
				t.Errorf("an edited body verifies: %s", edited.Body)
			}
		}
	}
}
