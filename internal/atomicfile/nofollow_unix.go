//go:build unix

package atomicfile

import "syscall"

// noFollow makes an open fail on a symbolic link at the path's last element.
const noFollow = syscall.O_NOFOLLOW
