package runs

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDecodeTurnsRefusesWhatIsNotABatch(t *testing.T) {
	for name, raw := range map[string]string{
		"empty":      `[]`,
		"not array":  `{"prompt":"x"}`,
		"not object": `["x"]`,
		"over batch": "[" + strings.TrimSuffix(strings.Repeat(`{},`, MaxBatch+1), ",") + "]",
	} {
		if _, err := DecodeTurns(json.RawMessage(raw)); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	turns, err := DecodeTurns(json.RawMessage(`[{"index":7,"prompt":"p","tokens":{"input_tokens":3,"output_tokens":4}}]`))
	if err != nil || len(turns) != 1 || turns[0].Index != 0 || turns[0].Tokens.InputTokens != 3 {
		t.Fatalf("a batch of one: %+v, %v", turns, err)
	}
}
