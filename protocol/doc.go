// Package protocol holds the wire types of the car-server JSON-RPC surface:
// method names, params and results, the proposal IR and the error codes.
//
// It performs no I/O, and of the daemon it imports only internal/jsonvalue
// (the JSON scanning its decoders share, itself a leaf that imports no other
// package of the daemon), so clients in Go can import it to speak the
// protocol exactly as the daemon does.
package protocol
