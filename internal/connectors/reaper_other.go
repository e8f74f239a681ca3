//go:build !linux

package connectors

import (
	"fmt"
	"os"
	"syscall"
)

// ReaperCommand is the daemon's hidden subcommand that runs a stdio server;
// outside Linux there is none.
const ReaperCommand = "connector-run"

func reaperAttr() *syscall.SysProcAttr { return procAttr() }

// RunReaper is refused outside Linux: the daemon runs servers directly.
func RunReaper([]string) int {
	fmt.Fprintln(os.Stderr, ReaperCommand+" runs only on Linux")
	return 2
}
