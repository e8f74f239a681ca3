// Package checkpoint keeps saved copies of the daemon's state as files
// under $CAR_HOME/checkpoints/<id>.json: a header line of metadata, then
// the state, written atomically in one file (temp file, fsync, rename,
// 0600), bounded in count and size, and refused by name when a file is
// corrupt. Listing reads only the header lines; saves, restores and lists
// take one of MaxConcurrentOps slots. It knows nothing of the engine: it
// stores and returns namespaces of decoded JSON values; the engine decides
// when a restore may happen and applies it.
package checkpoint
