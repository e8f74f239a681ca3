// Package agents owns what the daemon knows of agent identities that live
// beyond a connection: the per-agent tokens the operator mints (only their
// hashes, read on every agent auth so issuing and revoking take effect
// without a restart), and the per-agent permission postures. Both are kept
// behind the store seam (store.AgentTokens, store.Postures): on one daemon
// in a 0600 file each (TokenFile, PostureFile, written atomically), on
// several in the shared store. It never imports a transport.
package agents
