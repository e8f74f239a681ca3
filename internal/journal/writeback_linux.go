package journal

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing f's dirty pages to the
// disk and returns without waiting for them (sync_file_range with
// SYNC_FILE_RANGE_WRITE over the whole file). It is only a head start for
// the fsync that follows, which still waits for every page and reports
// any error: its own error is ignored (a file system without it, such as
// some FUSE ones, only loses the head start).
func startWriteback(f *os.File) {
	c, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = c.Control(func(fd uintptr) {
		_ = unix.SyncFileRange(int(fd), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
	})
}
