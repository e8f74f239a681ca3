// Package fdlimit raises a process's limit on open files (RLIMIT_NOFILE):
// every connection, on either end, is one file descriptor.
package fdlimit

// Limit is the limit on open files: the soft limit in force and the hard
// limit it may be raised to.
type Limit struct {
	Soft, Hard uint64
}
