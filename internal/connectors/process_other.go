//go:build !linux

package connectors

import (
	"os"
	"syscall"
)

// procAttr is the default outside Linux: no signal reaches the child when
// the daemon is killed, and it ends when its stdin closes.
func procAttr() *syscall.SysProcAttr { return nil }

// killGroup kills the child.
func killGroup(p *os.Process) { _ = p.Kill() }
