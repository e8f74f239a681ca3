//go:build !unix

package rpc

import "net"

// newFiller, where the runtime cannot say a socket has data without a
// read, reads directly: the connection holds the buffer while it waits.
func newFiller(nc net.Conn) filler { return directFiller{nc} }
