// Package rpc is the daemon's WebSocket JSON-RPC server: it accepts
// connections (TCP and Unix socket), enforces Host (on TCP, GuardHost),
// origin, auth, handshake and limits, maps methods onto the engine's Runtime, and implements the engine's
// tool executor as tools.execute callbacks to the submitting client.
//
// Every connection is a session with a server-minted id. The read loop of a
// connection never waits on its own handlers, so callback replies always get
// through; handlers run on goroutines the connection owns and waits for.
package rpc
