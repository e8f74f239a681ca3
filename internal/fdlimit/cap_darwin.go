package fdlimit

import "syscall"

// systemCap is kern.maxfilesperproc: macOS refuses a soft limit above it,
// however high the hard limit (often unlimited) is.
func systemCap() uint64 {
	n, err := syscall.SysctlUint32("kern.maxfilesperproc")
	if err != nil {
		return 0
	}
	return uint64(n)
}
