package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unsafe"

	"github.com/parslee-ai/car-server/internal/bufpool"
	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/internal/store"
)

// The encodings of one event, without reflection: what its hash covers,
// and, for a durable log that keeps the data as encoded (the file
// store's), its record. Both take the data already encoded, once.

// appendHashInput appends what eventHash hashes, byte for byte what
// json.Marshal writes for eventHash's struct, with data as encoded.
func appendHashInput(b []byte, e *Event, data []byte) []byte {
	return appendHashTail(append(appendHashHead(b, e), data...), e)
}

// appendHashHead appends the hash input up to the data: the members
// before it and the data's name.
func appendHashHead(b []byte, e *Event) []byte {
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, e.Seq, 10)
	b = append(b, `,"kind":`...)
	b = jsonvalue.AppendString(b, string(e.Kind))
	// The time as json.Marshal writes its RFC 3339 text: digits and
	// "-:.TZ+", none of which a JSON string escapes.
	b = append(b, `,"timestamp":"`...)
	b = e.Timestamp.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","proposal_id":`...)
	b = jsonvalue.AppendString(b, e.ProposalID)
	b = append(b, `,"action_id":`...)
	b = jsonvalue.AppendString(b, e.ActionID)
	b = append(b, `,"connection":`...)
	b = jsonvalue.AppendString(b, e.Connection)
	return append(b, `,"data":`...)
}

// appendHashTail appends the hash input after the data.
func appendHashTail(b []byte, e *Event) []byte {
	b = append(b, `,"prev_hash":`...)
	b = jsonvalue.AppendString(b, e.PrevHash)
	if e.Node != "" {
		b = append(b, `,"node":`...)
		b = jsonvalue.AppendString(b, e.Node)
	}
	return append(b, '}')
}

// hashBufs lends the hash input and the data's encoding their buffers:
// every event is hashed, so the chain costs no buffer of its own per
// event.
var hashBufs = bufpool.New(1024, 64<<10)

// sumWith is the SHA-256 of e's hash input, with the data already
// encoded.
func sumWith(e *Event, data []byte) [sha256.Size]byte {
	b := hashBufs.Get()
	*b = appendHashInput(*b, e, data)
	sum := sha256.Sum256(*b)
	hashBufs.Put(b)
	return sum
}

// eventSum is the SHA-256 of e's hash input, encoding the data in place
// in it; data that does not encode (a NaN) hashes as nothing.
func eventSum(e *Event) [sha256.Size]byte {
	b := hashBufs.Get()
	defer hashBufs.Put(b)
	head := appendHashHead(*b, e)
	withData, err := jsonvalue.Append(head, e.Data)
	if err != nil {
		*b = head
		return sha256.Sum256(nil)
	}
	*b = appendHashTail(withData, e)
	return sha256.Sum256(*b)
}

// hashWith is eventHash with the data already encoded.
func hashWith(e *Event, data []byte) string {
	sum := sumWith(e, data)
	return hexText(&sum)
}

// hexText is sum as the lowercase hex of an event's hash.
func hexText(sum *[sha256.Size]byte) string {
	var dst [2 * sha256.Size]byte
	hex.Encode(dst[:], sum[:])
	return string(dst[:])
}

// hashSlab is how many hashes' text one slab of hashTexts holds.
const hashSlab = 16

// hashTexts hands out the hex text of the hashes the log records, carved
// from slabs of hashSlab hashes (1 KiB): one allocation for every sixteen
// events instead of one each. A slab lives while any of its hashes does;
// the log keeps its events, and drops them, in the order their hashes
// were made, so a slab is mostly freed at once. Each text is written once,
// before it is handed out, and never again. Not safe for concurrent use:
// the log calls it under its lock.
type hashTexts struct{ slab []byte }

// of is sum's text.
func (h *hashTexts) of(sum *[sha256.Size]byte) string {
	const n = 2 * sha256.Size
	if cap(h.slab)-len(h.slab) < n {
		h.slab = make([]byte, 0, hashSlab*n)
	}
	at := len(h.slab)
	h.slab = h.slab[:at+n]
	hex.Encode(h.slab[at:], sum[:])
	return unsafe.String(&h.slab[at], n)
}

// encodeData is e's data as JSON (json.Marshal's bytes); data that does not
// encode (a NaN) is replaced, in e too, by the encoding error.
func encodeData(e *Event) []byte {
	return appendData(nil, e)
}

// appendData appends encodeData's bytes to b.
func appendData(b []byte, e *Event) []byte {
	out, err := jsonvalue.Append(b, e.Data)
	if err != nil {
		e.Data = map[string]any{"unencodable_data": err.Error()}
		out, _ = jsonvalue.Append(b, e.Data)
	}
	return out
}

// appendBody appends e as its JSON (the fields of protocol.Event), with
// data as encoded.
func appendBody(b []byte, e *Event, data []byte) []byte {
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, e.Seq, 10)
	b = jsonvalue.AppendStringMember(b, "node", e.Node)
	b = append(b, `,"kind":`...)
	b = jsonvalue.AppendString(b, string(e.Kind))
	b = append(b, `,"timestamp":"`...)
	b = e.Timestamp.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	b = jsonvalue.AppendStringMember(b, "proposal_id", e.ProposalID)
	b = jsonvalue.AppendStringMember(b, "action_id", e.ActionID)
	b = jsonvalue.AppendStringMember(b, "connection", e.Connection)
	if e.Data != nil { // an empty object too: the hash covers it as {}
		b = append(b, `,"data":`...)
		b = append(b, data...)
	}
	b = jsonvalue.AppendStringMember(b, "prev_hash", e.PrevHash)
	b = jsonvalue.AppendStringMember(b, "hash", e.Hash)
	return append(b, '}')
}

// rawRecord is e as a durable log that keeps the data as encoded holds it.
func rawRecord(e *Event, data []byte) store.EventRecord {
	return recordOf(e, appendBody(nil, e, data))
}

// recordOf is the record of e with body as its body.
func recordOf(e *Event, body []byte) store.EventRecord {
	return store.EventRecord{Node: e.Node, Seq: e.Seq, At: e.Timestamp, Kind: string(e.Kind),
		ProposalID: e.ProposalID, Hash: e.Hash, PrevHash: e.PrevHash, Body: body}
}

// rawEvent is an event's JSON with its data kept as encoded.
type rawEvent struct {
	Seq        uint64          `json:"seq"`
	Node       string          `json:"node"`
	Kind       EventKind       `json:"kind"`
	Timestamp  time.Time       `json:"timestamp"`
	ProposalID string          `json:"proposal_id"`
	ActionID   string          `json:"action_id"`
	Connection string          `json:"connection"`
	Data       json.RawMessage `json:"data"`
	PrevHash   string          `json:"prev_hash"`
	Hash       string          `json:"hash"`
}

// CheckRecord says why a record of a log that keeps the data as encoded
// (the file store's) does not hold: its body does not decode, disagrees
// with its columns, or does not hash to its hash (the engine's one
// definition of an event's hash, over the data's bytes as kept). Links are
// the caller's to check.
func CheckRecord(r *store.EventRecord) error {
	var x rawEvent
	if err := json.Unmarshal(r.Body, &x); err != nil {
		return fmt.Errorf("its body does not decode: %w", err)
	}
	if x.Node != r.Node || x.Seq != r.Seq || x.Hash != r.Hash || x.PrevHash != r.PrevHash || string(x.Kind) != r.Kind || x.ProposalID != r.ProposalID || !x.Timestamp.Equal(r.At) {
		return errors.New("its columns disagree with its body")
	}
	data := []byte(x.Data)
	if len(data) == 0 {
		data = []byte("null") // an event without data: omitted from its body, null in its hash
	}
	e := Event{Seq: x.Seq, Node: x.Node, Kind: x.Kind, Timestamp: x.Timestamp, ProposalID: x.ProposalID, ActionID: x.ActionID, Connection: x.Connection, PrevHash: x.PrevHash}
	if hashWith(&e, data) != x.Hash {
		return errors.New("its body does not hash to its hash")
	}
	return nil
}
