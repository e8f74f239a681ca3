// Package protocol holds the wire types of the car-server JSON-RPC surface:
// method names, params and results, the proposal IR and the error codes.
//
// It performs no I/O and imports nothing from the daemon, so clients in Go can
// import it to speak the protocol exactly as the daemon does.
package protocol
