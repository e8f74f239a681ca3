// Package connectors makes the daemon an MCP client: each connector is one
// MCP server (Streamable HTTP, or a child process over stdio) whose tools
// the daemon discovers, keeps disabled until a person enables them, and
// publishes as daemon-wide tools (engine.DaemonTools) named
// mcp_<slug>_<tool>, so a proposal calling one passes every gate exactly as
// a client's tool does; the connector is the engine.ToolExecutor that then
// sends tools/call.
//
// It owns the connectors' lifecycles (connect, discover, reconnect with
// backoff, tools/list_changed), the child processes (which never outlive
// the daemon: process_linux.go), the risk classification from MCP
// annotations (classify.go), the bounds on what a server may send
// (discovery count, result bytes), and the files under $CAR_HOME: the
// operator's connectors.toml (file.go), the enabled tools in
// connectors.json and the secret header and environment values in
// connectors.secrets.json (persist.go).
//
// It sits in the transport layer beside internal/rpc: it does network and
// process I/O. It never imports internal/rpc, a store backend or
// internal/journal.
package connectors
