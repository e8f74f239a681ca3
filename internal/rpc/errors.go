package rpc

import (
	"fmt"
	"unicode/utf8"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// rpcError builds a JSON-RPC error with a formatted, human-readable message.
func rpcError(code int64, format string, args ...any) *jsonrpc2.Error {
	return &jsonrpc2.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func invalidParams(format string, args ...any) *jsonrpc2.Error {
	return rpcError(protocol.CodeInvalidParams, format, args...)
}

func internalError(format string, args ...any) *jsonrpc2.Error {
	return rpcError(protocol.CodeInternal, format, args...)
}

// maxEchoedName bounds a client-chosen name (a method) repeated in a message.
const maxEchoedName = 200

// echoName is name as an error message repeats it: cut at maxEchoedName
// bytes on a rune boundary, saying how long it was.
func echoName(name string) string {
	if len(name) <= maxEchoedName {
		return name
	}
	cut := maxEchoedName
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…(%d bytes)", name[:cut], len(name))
}

// storeError is the reply to a method the shared store failed: a runtime
// error that says the store is unavailable, what did not happen, and what to
// do about it.
func storeError(method, outcome string, err error) *jsonrpc2.Error {
	return internalError("%v; %s: retry once the store is reachable again (GET /healthz answers 200 then)",
		store.Wrap(method+" failed", err), outcome)
}
