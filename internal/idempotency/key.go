package idempotency

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/protocol"
)

// Scope is whose a result is: the principal that ran the call, the tenant
// it ran in, and the tool's identity (its name and the digest of its
// registered schema). Two calls share a result only when their scopes are
// equal, so another agent, another tenant or another tool of the same name
// can neither poison a result nor read it.
type Scope struct {
	// Agent is the agent the submitting connection is bound to; "" is the
	// one principal every plain client (and a host-role connection) shares.
	Agent  string
	Tenant string
	Tool   string
	// Schema is the tool's SchemaDigest; "" for a tool the daemon owns.
	Schema string
}

// scopedPrefix opens every scoped key's hash input, so a scoped key never
// equals a key of the older form (Key), whose inputs start otherwise.
const scopedPrefix = "car-idempotency-v2"

// Key is the cache key of a call in scope s: the explicit key when given,
// else the canonical JSON of the parameters. Every field is written with
// its length, so no choice of names can make two scopes hash alike.
func (s Scope) Key(params any, explicit string) string {
	h := sha256.New()
	field(h, scopedPrefix)
	if s.Agent == "" {
		field(h, "plain")
	} else {
		field(h, "agent")
		field(h, s.Agent)
	}
	field(h, s.Tenant)
	field(h, s.Tool)
	field(h, s.Schema)
	if explicit != "" {
		field(h, "explicit")
		field(h, explicit)
	} else {
		field(h, "params")
		field(h, string(jsonvalue.Canonical(params)))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// field writes s to h after its length.
func field(h hash.Hash, s string) {
	h.Write(binary.AppendUvarint(nil, uint64(len(s))))
	h.Write([]byte(s))
}

// Key is the key an older daemon gave a call, before results belonged to a
// principal: tenant, tool, and the explicit key when given, else the
// canonical JSON of the parameters. Results it stored belong to the plain
// principal; the engine reads them back under this key for plain clients
// only, whatever the tool's schema is now.
func Key(tenant, tool string, params any, explicit string) string {
	h := sha256.New()
	if explicit != "" {
		fmt.Fprintf(h, "explicit\x00%s\x00%s\x00%s", tenant, tool, explicit)
	} else {
		fmt.Fprintf(h, "params\x00%s\x00%s\x00", tenant, tool)
		h.Write(jsonvalue.Canonical(params))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// SchemaDigest is the identity of a registered tool beyond its name: a
// SHA-256 of its name, its description and the canonical JSON of its
// parameters and returns schemas. Key order and spacing do not change it; the dispatch settings
// (idempotent, cache_ttl_secs, rate_limit) do not either, since they change
// how the tool is called, not what it is.
func SchemaDigest(s protocol.ToolSchema) string {
	h := sha256.New()
	field(h, s.Name)
	field(h, s.Description)
	for _, raw := range [][]byte{s.Parameters, s.Returns} {
		field(h, string(canonicalRaw(raw)))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// canonicalRaw is raw JSON in canonical form; absent and null are empty,
// and a text that is not JSON (never registered: the compiler refuses it)
// is itself.
func canonicalRaw(raw []byte) []byte {
	v, err := protocol.DecodeValue(raw)
	switch {
	case err != nil:
		return raw
	case v == nil:
		return nil
	}
	return jsonvalue.Canonical(v)
}
