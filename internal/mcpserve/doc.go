// Package mcpserve is the daemon's MCP endpoint: Streamable HTTP on a
// listener of its own (mcp_bind, path /mcp), on the official Go SDK's
// server. It authenticates each request's bearer token, bounds what a
// request may cost (body size, sessions per principal, calls in flight per
// principal), answers tools/list with what the principal may call and runs
// each tools/call as a one-action proposal through the rpc layer
// (internal/rpc/mcpgateway.go), which is the only part of the daemon it
// asks. Stdio.go forwards a stdio MCP client to a running daemon's
// endpoint, for car-server mcp.
package mcpserve
