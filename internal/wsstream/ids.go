package wsstream

import (
	"bytes"
	"encoding/json"
	"regexp"
)

// JSON-RPC 2.0 allows any integer id, but the JSON-RPC library holds
// numeric ids as unsigned. A negative id is therefore carried through the
// library as a marked string (LiftID, applied by the daemon's frame check)
// and restored on the way out: the peer gets its id back exactly as it sent
// it. (A peer that sends a string id beginning with the marker itself gets
// it back as a number; the marker starts with a NUL character, which no
// ordinary id has.)
const negativeIDMarker = "\x00car-negative-id:"

// markedIDOut finds a marked id in an encoded message (json.Marshal writes
// the NUL as \u0000).
var markedIDOut = regexp.MustCompile(`"id":"\\u0000car-negative-id:(-[0-9]+)"`)

// LiftID returns a negative integer id (within int64) as the marked string
// id the stream restores on write; ok is false for any other id.
func LiftID(id json.RawMessage) (json.RawMessage, bool) {
	id = bytes.TrimSpace(id)
	if len(id) < 2 || id[0] != '-' {
		return nil, false
	}
	var n json.Number
	if json.Unmarshal(id, &n) != nil {
		return nil, false
	}
	if _, err := n.Int64(); err != nil {
		return nil, false // not an integer in range: the frame check refuses it
	}
	marked, err := json.Marshal(negativeIDMarker + string(id))
	if err != nil {
		return nil, false
	}
	return marked, true
}

// lowerNegativeID restores a marked id in an encoded message to the number
// the peer sent.
func lowerNegativeID(data []byte) []byte {
	if !bytes.Contains(data, []byte(`car-negative-id:`)) {
		return data
	}
	return markedIDOut.ReplaceAll(data, []byte(`"id":$1`))
}
