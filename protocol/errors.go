package protocol

// JSON-RPC error codes used by car-server. The standard codes come from the
// JSON-RPC 2.0 specification; the others follow the upstream CAR daemon.
const (
	CodeParseError       = -32700 // the frame is not JSON
	CodeInvalidRequest   = -32600 // JSON, but not a JSON-RPC 2.0 request
	CodeMethodNotFound   = -32601 // no such method
	CodeInvalidParams    = -32602 // params missing, mistyped or out of range
	CodeInternal         = -32603 // runtime error
	CodeAuthRequired     = -32001 // session.auth must come first; the connection closes
	CodeApprovalDenied   = -32003 // approval denied or timed out
	CodeHandlerDeadline  = -32004 // handler deadline exceeded; the outcome may have committed
	CodeHandshakeMissing = -32005 // protocol handshake required
	CodeVersionMismatch  = -32006 // protocol version missing, malformed or different
)

// ProtocolVersion is the wire protocol version this package describes. It is
// independent of the release version and changes only on an incompatible
// change to shapes or semantics.
const ProtocolVersion = 2
