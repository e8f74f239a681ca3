// Package ui is the dashboard: a page the daemon serves itself under /ui/,
// from assets embedded in the binary, where a person watches agents and
// decides on their approvals. The page talks to the daemon over the same
// WebSocket JSON-RPC as every client, with the host role.
package ui
