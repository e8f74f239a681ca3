// Package agents owns what the daemon knows of agent identities that live
// beyond a connection: the per-agent permission postures (Postures, the
// policy in force, kept in memory over a PostureStore), the name of an
// agent with a token (IssuedAgent) and the tenants a token admits
// (tenants.go: Tenants, Admits). Where they are kept is the store's:
// the token hashes and the posture document live in a 0600 file each in
// store/file (written atomically under a lock), in the shared database in
// store/postgres, behind store.AgentTokens and store.Postures (which is
// this package's PostureStore). It never imports a transport, the store or
// the journal.
package agents
