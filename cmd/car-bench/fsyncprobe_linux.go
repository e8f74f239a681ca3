package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync flushes f's data, and its metadata only where reading the data
// back needs it.
func fdatasync(f *os.File) error {
	return unix.Fdatasync(int(f.Fd()))
}
