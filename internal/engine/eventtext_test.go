package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

func TestSchemaViolationIsLoggedWithoutItsValue(t *testing.T) {
	schema := `{"type": "object", "required": ["id"], "properties": {
		"ssn": {"type": "string", "pattern": "^[0-9]{3}-[0-9]{2}-[0-9]{4}$"},
		"a/b": {"type": "object", "properties": {"n": {"maximum": 10}}}}}`
	tool, err := compileTool(protocol.ToolSchema{Name: "lookup", Parameters: json.RawMessage(schema)}, DefaultSchemaLimits)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		params     string
		secret     string
		wantLogged string
	}{
		{`{"id": 1, "ssn": "123-45-67890"}`, "123-45-67890", "parameters do not match the schema of tool 'lookup': /ssn: pattern"},
		{`{"ssn": "secret-ssn"}`, "secret-ssn", "parameters do not match the schema of tool 'lookup': /: required; /ssn: pattern"},
		{`{"id": 1, "a/b": {"n": 987654}}`, "987,654", "parameters do not match the schema of tool 'lookup': /a~1b/n: maximum"},
	} {
		var params any
		if err := json.Unmarshal([]byte(tc.params), &params); err != nil {
			t.Fatal(err)
		}
		verr := tool.ValidateParams(context.Background(), params)
		if verr == nil {
			t.Fatalf("%s: no violation", tc.params)
		}
		if !strings.Contains(verr.Error(), tc.secret) {
			t.Errorf("the caller's message lost the value %q: %s", tc.secret, verr)
		}
		// Wrapped, as a retry wraps it, the wrapper's words stay.
		wrapped := fmt.Errorf("%w (gave up after 2 attempts)", verr)
		if got := LoggedError(wrapped); got != tc.wantLogged+" (gave up after 2 attempts)" {
			t.Errorf("logged %q, want %q", got, tc.wantLogged+" (gave up after 2 attempts)")
		}
	}
	if got := LoggedError(fmt.Errorf("plain")); got != "plain" {
		t.Errorf("a plain error is logged as %q", got)
	}
}
