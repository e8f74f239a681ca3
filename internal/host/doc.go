// Package host is the host registry behind the host.* methods: the agents
// that clients register, the approvals a person resolves, the ring of host
// events, and the ownership rules that say which connection may change what.
//
// A connection is named by an opaque string (the rpc layer's connection id).
// Every mutation records its events in a bounded ring and hands them to every
// subscriber's send function in the one order the registry produced them; a
// subscriber's snapshot and its first event join without a gap or a repeat.
// Reads are open to every connection; mutation of an agent, or of an
// approval a client raised, belongs to the connection that created it.
//
// Of the daemon the package imports only protocol (and its jsonvalue): never
// a transport or the engine. It only keeps state and says what changed;
// delivery belongs to the caller's send.
package host
