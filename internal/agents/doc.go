// Package agents owns what the daemon knows of agent identities that live
// beyond a connection: the per-agent tokens the operator mints (only their
// hashes, in a 0600 file, re-read on every agent auth so issuing and
// revoking take effect without a restart), and the per-agent permission
// postures (agent-permissions.json), written atomically. It never imports
// a transport.
package agents
