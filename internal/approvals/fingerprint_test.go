package approvals

import (
	"encoding/json"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

// Fingerprints are stored in the ledger: the same operation must keep its
// fingerprint from one version of the daemon to the next.
func TestFingerprintIsStable(t *testing.T) {
	a := &protocol.Action{Type: protocol.ActionToolCall, Tool: "deploy", Parameters: map[string]any{
		"env": "prod<&>", "n": json.Number("3"), "list": []any{1.5, nil, true}, "é": map[string]any{}}}
	if got, want := Fingerprint(a), "5dc0348b021d17d43b700f54501b541c"; got != want {
		t.Errorf("fingerprint %s, want %s", got, want)
	}
	if got, want := Fingerprint(&protocol.Action{Type: protocol.ActionStateWrite}), "81628a2723e6a1aab4b3fc696f0a87c2"; got != want {
		t.Errorf("fingerprint of an action without parameters %s, want %s", got, want)
	}
}
