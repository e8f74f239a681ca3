//go:build unix

package rpc

import (
	"io"
	"net"
	"os"
	"syscall"
)

// newFiller returns how a pooledConn over nc fills a buffer: it waits for
// the socket to have data holding no buffer (the runtime's poller wakes
// it), and only then reads into one. A connection that cannot be read that
// way is read directly, holding the buffer while it waits.
func newFiller(nc net.Conn) filler {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return directFiller{nc}
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return directFiller{nc}
	}
	f := &socketFiller{nc: nc, raw: raw}
	f.ready = f.tryRead
	return f
}

// socketFiller reads a socket once the runtime's poller says it has data.
// One read runs at a time (the connection's reader).
type socketFiller struct {
	nc    net.Conn
	raw   syscall.RawConn
	ready func(fd uintptr) bool // tryRead, made once

	// The read in progress: the buffer it took, and what it got.
	buf *[connBufSize]byte
	n   int
	err error
}

// tryRead reads without blocking, into a buffer it takes only for the
// read; false puts it back and asks the poller to wait for data.
func (f *socketFiller) tryRead(fd uintptr) bool {
	f.buf = connBufs.Get().(*[connBufSize]byte)
	for {
		f.n, f.err = syscall.Read(int(fd), f.buf[:])
		if f.err != syscall.EINTR {
			break
		}
	}
	if f.err == syscall.EAGAIN {
		connBufs.Put(f.buf)
		f.buf = nil
		return false
	}
	return true
}

func (f *socketFiller) fill() (*[connBufSize]byte, int, error) {
	err := f.raw.Read(f.ready)
	b := f.buf
	f.buf = nil
	if err == nil && f.err == nil && f.n > 0 {
		return b, f.n, nil
	}
	if b != nil {
		connBufs.Put(b)
	}
	switch {
	case err != nil:
		return nil, 0, err // closed, or past a deadline, as the connection words it
	case f.err != nil:
		return nil, 0, &net.OpError{Op: "read", Net: f.nc.LocalAddr().Network(), Source: f.nc.LocalAddr(), Addr: f.nc.RemoteAddr(), Err: os.NewSyscallError("read", f.err)}
	}
	return nil, 0, io.EOF
}
