// Package netaddr answers questions about network addresses that both the
// daemon and its tools ask, such as whether a host is this machine. It is a
// leaf: it imports nothing of the daemon, so a small command (car-bench)
// can use it without linking the daemon.
package netaddr

import "net"

// IsLoopbackHost reports whether host (a name or an address, without a
// port) is this machine: localhost, or a loopback address.
func IsLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
