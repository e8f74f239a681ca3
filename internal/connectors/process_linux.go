package connectors

import (
	"os"
	"syscall"
)

// procAttr puts the child in a process group of its own, so that killGroup
// ends its children too, and has the kernel kill it when the daemon dies,
// SIGKILL included (Pdeathsig).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup kills the process group the child leads.
func killGroup(p *os.Process) { _ = syscall.Kill(-p.Pid, syscall.SIGKILL) }
