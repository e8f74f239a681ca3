package wsstream

import (
	"bytes"
	"encoding/json"
	"regexp"
)

// JSON-RPC 2.0 allows any integer id, but the JSON-RPC library holds
// numeric ids as unsigned. A negative id is therefore carried through the
// library as a marked string and restored on the way out: the peer gets its
// id back exactly as it sent it. (A peer that sends a string id beginning
// with the marker itself gets it back as a number; the marker starts with a
// NUL character, which no ordinary id has.)
const negativeIDMarker = "\x00car-negative-id:"

// negativeIDHint finds frames that may carry a negative id, so that the
// common frame is never decoded twice.
var negativeIDHint = regexp.MustCompile(`"id"\s*:\s*-`)

// markedIDOut finds a marked id in an encoded message (json.Marshal writes
// the NUL as \u0000).
var markedIDOut = regexp.MustCompile(`"id":"\\u0000car-negative-id:(-[0-9]+)"`)

// liftNegativeID returns frame with a top-level negative integer id turned
// into a marked string id; any other frame comes back unchanged.
func liftNegativeID(frame []byte) []byte {
	if !negativeIDHint.Match(frame) {
		return frame
	}
	var msg map[string]json.RawMessage
	if json.Unmarshal(frame, &msg) != nil {
		return frame // the frame check answers what does not decode
	}
	id := bytes.TrimSpace(msg["id"])
	if len(id) < 2 || id[0] != '-' {
		return frame
	}
	var n json.Number
	if json.Unmarshal(id, &n) != nil {
		return frame
	}
	if _, err := n.Int64(); err != nil {
		return frame // not an integer in range: the frame check refuses it
	}
	marked, err := json.Marshal(negativeIDMarker + string(id))
	if err != nil {
		return frame
	}
	msg["id"] = marked
	out, err := json.Marshal(msg)
	if err != nil {
		return frame
	}
	return out
}

// lowerNegativeID restores a marked id in an encoded message to the number
// the peer sent.
func lowerNegativeID(data []byte) []byte {
	if !bytes.Contains(data, []byte(`car-negative-id:`)) {
		return data
	}
	return markedIDOut.ReplaceAll(data, []byte(`"id":$1`))
}
