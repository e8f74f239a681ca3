package rpc

import (
	"fmt"

	"github.com/sourcegraph/jsonrpc2"

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
