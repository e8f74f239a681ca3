// Package streams keeps the handles of detached (streaming and
// long-running) tool invocations: who owns each, its bounded buffer of
// chunks with a count of those dropped, its status, the idle timeout that
// fails a silent handle and the reaping of finished handles nobody polled.
//
// A handle is opened before the tool is asked to start, fed by the chunks
// its tool sends, drained by Poll, ended by a done or error chunk, by
// Cancel, by the idle timeout or by its owner's departure. Subscribers see
// every chunk of the handles they may see, through a push function that
// must not block (a fanout queue's Push).
//
// Time comes from Options.Now, so that tests move it by hand; Sweep applies
// the idle timeout and the reaping, and Run calls it periodically. Of the
// daemon the package imports only protocol (and its jsonvalue): never a
// transport or the engine.
package streams
