// Package flow is information-flow analysis over one proposal: which tools
// read secrets (sources), which send data away (sinks), and whether data
// labelled secret can travel from a source to a sink along $id.output
// references and state keys — including keys that earlier proposals of the
// same connection wrote. It also finds forbidden orderings (a tool run after
// another the operator declared must not precede it).
//
// It is a leaf: it reads the labels file and analyses what it is given. It
// never imports the engine, never executes anything and keeps no state of
// its own; the engine's gate calls it and decides what a finding means.
package flow
