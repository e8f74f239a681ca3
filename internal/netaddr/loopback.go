// Package netaddr holds what the daemon, its listeners and its load tool
// need to know about a network address, and nothing else: it imports no
// package of the daemon.
package netaddr

import "net"

// IsLoopbackHost reports whether host (a name or an address, without a
// port) is this machine: "localhost" or a loopback address.
func IsLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
