package auditlog

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
)

// The ops of a segment's lines. Every line is one JSON object with the
// journal's "key" and "op".
const (
	OpEvent     = "event"     // one event of the chain
	OpHead      = "head"      // a signed head: the newest event's seq and hash
	OpRetention = "retention" // a signed record of the first event kept after a retention
)

// Line is one line of a segment. An event fills Seq, At, Node, Kind,
// ProposalID, Hash, PrevHash and Body (the event's JSON as the engine
// encoded it, which its hash covers); a head fills Seq and Hash (the event
// it signs), At, Node and Signature; a retention record fills Seq (the
// first event kept), PrevHash (that event's link), At, Node and Signature.
type Line struct {
	Key        string          `json:"key"`
	Op         string          `json:"op"`
	Seq        uint64          `json:"seq"`
	At         time.Time       `json:"at"`
	Node       string          `json:"node,omitempty"`
	Kind       string          `json:"kind,omitempty"`
	ProposalID string          `json:"proposal_id,omitempty"`
	Hash       string          `json:"hash,omitempty"`
	PrevHash   string          `json:"prev_hash,omitempty"`
	Signature  string          `json:"signature,omitempty"`
	Body       json.RawMessage `json:"body,omitempty"`
}

// keyOf is the journal key of each op: a few keys shared by every line, so
// that an append-only journal needs no memory per line.
func keyOf(op string) string { return op[:1] }

// AppendEvent appends the line of one event to b, with its newline.
func AppendEvent(b []byte, seq uint64, at time.Time, node, kind, proposalID, hash, prevHash string, body json.RawMessage) []byte {
	b = append(b, `{"key":"e","op":"event","seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"at":"`...)
	b = at.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	b = jsonvalue.AppendStringMember(b, "node", node)
	b = jsonvalue.AppendStringMember(b, "kind", kind)
	b = jsonvalue.AppendStringMember(b, "proposal_id", proposalID)
	b = jsonvalue.AppendStringMember(b, "hash", hash)
	b = jsonvalue.AppendStringMember(b, "prev_hash", prevHash)
	if len(body) > 0 {
		b = append(b, `,"body":`...)
		b = append(b, body...)
	}
	return append(b, "}\n"...)
}

// Marshal encodes a head or a retention record as its line, with its
// newline.
func (l *Line) Marshal() []byte {
	l.Key = keyOf(l.Op)
	b, _ := json.Marshal(l) // every field encodes
	return append(b, '\n')
}

// ParseLine decodes one line (without its newline).
func ParseLine(b []byte) (Line, error) {
	var l Line
	if err := json.Unmarshal(b, &l); err != nil {
		return Line{}, fmt.Errorf("not a line of the event log: %w", err)
	}
	switch l.Op {
	case OpEvent, OpHead, OpRetention:
	default:
		return Line{}, fmt.Errorf("not a line of the event log: op %q", l.Op)
	}
	return l, nil
}
