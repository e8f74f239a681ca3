package auditlog

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"time"

	"github.com/parslee-ai/car-server/internal/atomicfile"
)

// HeadFile is the name, beside the segments, of the file that holds the
// newest signed head.
const HeadFile = "head.json"

// Head is a signed statement of the daemon that its chain held the event
// Seq with hash Hash at Time: as a segment line, in HeadFile, and in an
// audit.head event to a subscriber (a witness).
type Head struct {
	Seq       uint64    `json:"seq"`
	Hash      string    `json:"hash"`
	Time      time.Time `json:"time"`
	Node      string    `json:"node"`
	Signature string    `json:"signature"`
}

// message is what a signature covers: a domain, the op, and the fields in
// a fixed order.
func message(op string, seq uint64, hash string, at time.Time, node string) []byte {
	b := []byte("car-audit/v1\n" + op + "\n")
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, '\n')
	b = append(b, hash...)
	b = append(b, '\n')
	b = at.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, '\n')
	return append(b, node...)
}

// Sign fills l's signature (a head or a retention record) with key.
func Sign(l *Line, key ed25519.PrivateKey) {
	l.At = l.At.UTC()
	l.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(key, message(l.Op, l.Seq, signedHash(l), l.At, l.Node)))
}

// signedHash is the hash a record's signature covers: a head's hash, a
// retention record's link.
func signedHash(l *Line) string {
	if l.Op == OpRetention {
		return l.PrevHash
	}
	return l.Hash
}

// VerifySignature says whether l's signature is pub's over l.
func VerifySignature(l *Line, pub ed25519.PublicKey) bool {
	sig, err := base64.StdEncoding.DecodeString(l.Signature)
	if err != nil {
		return false
	}
	return ed25519.Verify(pub, message(l.Op, l.Seq, signedHash(l), l.At, l.Node), sig)
}

// HeadOf is the head a head line holds.
func HeadOf(l *Line) Head {
	return Head{Seq: l.Seq, Hash: l.Hash, Time: l.At, Node: l.Node, Signature: l.Signature}
}

// Line is the head as a segment line.
func (h Head) Line() Line {
	return Line{Key: keyOf(OpHead), Op: OpHead, Seq: h.Seq, Hash: h.Hash, At: h.Time, Node: h.Node, Signature: h.Signature}
}

// WriteHeadFile replaces the head file at path with h (a temp file renamed
// over it, the directory fsynced).
func WriteHeadFile(path string, h Head) error {
	b, _ := json.Marshal(h) // every field encodes
	return atomicfile.Write(path, append(b, '\n'))
}

// ReadHeadFile reads the head file at path; ok is false when there is none.
func ReadHeadFile(path string) (h Head, ok bool, err error) {
	b, err := atomicfile.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Head{}, false, nil
	}
	if err != nil {
		return Head{}, false, err
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return Head{}, false, fmt.Errorf("the head file %s does not parse: %w", path, err)
	}
	return h, true, nil
}
