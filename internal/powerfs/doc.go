// Package powerfs is a file system for power-loss tests, after LazyFS
// (FAST '24) and ALICE (OSDI '14): a FUSE mount over a backing directory
// that keeps every change not yet made durable in memory of its own, so a
// test can cut the power and see what a real disk would have kept.
//
// The rules are POSIX's, not one file system's: an fsync (or fdatasync) of
// a file makes its data durable; an fsync of a directory makes its entries
// durable (the names created, renamed and removed in it). Nothing else is:
// a file whose data was fsynced but whose directory was not loses its name,
// and a rename without a directory fsync can be undone.
//
// Mount loads the backing directory (all of it durable) and serves it at a
// mount point. Cut is the power loss: the mount refuses all further I/O,
// everything not durable is discarded (Loss says how much of it a disk may
// have written anyway: nothing, the unsynced writes of a file in order up
// to a random byte, or a random subset of the pages and entries changed
// since their last fsync), the mount is unmounted, the durable image is
// written to the backing directory, and a fresh mount serves it. The
// process that used the mount must be dead before Cut.
//
// The model (model.go) holds all of it and is tested without a mount; the
// FUSE nodes (nodes.go) only translate. Only tests import this package.
// Mounting needs /dev/fuse and fusermount3 (the Debian package fuse3).
package powerfs
