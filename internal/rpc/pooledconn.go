package rpc

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// An idle WebSocket connection is one goroutine blocked reading its socket.
// With the buffers the upgrade hands over (net/http's 4 KiB reader and a
// fresh 4 KiB writer) it holds 8 KiB of buffer whether or not anything
// moves, and its goroutine waits deep in the WebSocket library, where the
// stack that decoding the last message grew to 8 KiB cannot shrink. The
// upgrade here hands the library buffers of a few bytes instead, over a
// connection that takes a pooled 4 KiB buffer only while bytes are in
// flight: a read takes one when the socket has data (on Unix the wait for
// data holds none), a write gathers one frame in one and sends it with a
// single write. Between messages the reader waits in awaitData, a few
// calls deep, so the runtime can halve its stack at the next collection.

// connBufSize is the pooled buffer: what one read takes from the socket,
// and the largest frame gathered into one write (larger ones are written
// as they come).
const connBufSize = 4096

// The WebSocket library's own buffers, in front of the pooled connection:
// it reads a header a byte at a time and writes it before the payload, so
// these only save calls.
const (
	wsReadBufSize  = 16 // bufio's smallest
	wsWriteBufSize = 64
)

var connBufs = sync.Pool{New: func() any { return new([connBufSize]byte) }}

// pooledHijack hands the WebSocket library a pooledConn and small buffers
// when it hijacks the upgrade's connection, and keeps the pooledConn.
type pooledHijack struct {
	http.ResponseWriter
	conn *pooledConn // set by a successful Hijack
}

func (h *pooledHijack) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := h.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the HTTP server cannot hand over the connection (no http.Hijacker)")
	}
	nc, brw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	// Bytes the client sent right after its upgrade request are already in
	// the server's reader: they are read first.
	var early []byte
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		early = append([]byte(nil), b...)
	}
	pc := newPooledConn(nc, early)
	h.conn = pc
	return pc, bufio.NewReadWriter(bufio.NewReaderSize(pc, wsReadBufSize), bufio.NewWriterSize(pc, wsWriteBufSize)), nil
}

// pooledConn is a net.Conn that holds a buffer only while bytes are in
// flight. Its reads never run past the end of the frame being read, so
// that once the library has read a whole message, its reader holds
// nothing and awaitData may wait on the socket alone.
type pooledConn struct {
	net.Conn
	filler filler // reads into a buffer once the socket has data

	// Read side. The connection's reader, and the library's closing
	// handshake, which reads for the peer's close frame, take rmu.
	rmu   sync.Mutex
	early []byte // bytes read before the hand-over, read first
	rbuf  *[connBufSize]byte
	r, w  int
	rerr  error // the socket's read error, once it had one
	rleft int   // bytes of the frame being read still to come, after its header
	rhdr  [14]byte
	rhn   int // bytes of the next frame's header read so far

	// Write side: the frame being gathered, or the rest of one too large to.
	// The library's write lock makes one write at a time.
	wbuf    *[connBufSize]byte
	wn      int
	through int // bytes of the current frame still to pass straight through

	held atomic.Int32 // pooled buffers it holds now (rbuf and wbuf)
}

func newPooledConn(nc net.Conn, early []byte) *pooledConn {
	return &pooledConn{Conn: nc, filler: newFiller(nc), early: early}
}

// filler reads from a connection into a buffer it takes from the pool; it
// returns the buffer with the bytes read, or puts it back and returns nil.
type filler interface {
	fill() (*[connBufSize]byte, int, error)
}

// directFiller reads straight away, holding its buffer while it waits for
// data.
type directFiller struct{ nc net.Conn }

func (d directFiller) fill() (*[connBufSize]byte, int, error) {
	b := connBufs.Get().(*[connBufSize]byte)
	n, err := d.nc.Read(b[:])
	if n <= 0 {
		connBufs.Put(b)
		if err == nil {
			err = io.ErrNoProgress
		}
		return nil, 0, err
	}
	return b, n, nil // a read that returned bytes reports its error again next time
}

// awaitData returns once the socket has data, or has failed, when the
// connection is between frames and holds nothing read; otherwise at once.
// The connection's reader calls it before each message.
func (c *pooledConn) awaitData() {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if c.rbuf != nil || len(c.early) > 0 || c.rerr != nil || c.rleft > 0 || c.rhn > 0 {
		return
	}
	c.load()
}

// load reads the socket into a pooled buffer; rmu is held.
func (c *pooledConn) load() {
	b, n, err := c.filler.fill()
	if b == nil {
		c.rerr = err
		return
	}
	c.held.Add(1)
	c.rbuf, c.r, c.w = b, 0, n
}

func (c *pooledConn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	p = p[:min(len(p), c.frameLimit())]
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	switch {
	case len(c.early) > 0:
		n = copy(p, c.early)
		c.early = c.early[n:]
	case c.rbuf == nil && c.rerr == nil && len(p) >= connBufSize:
		var err error
		if n, err = c.Conn.Read(p); err != nil { // straight into the caller's buffer
			c.advance(p[:n])
			return n, err
		}
	default:
		if c.rbuf == nil && c.rerr == nil {
			c.load()
		}
		if c.rbuf == nil {
			return 0, c.rerr
		}
		n = copy(p, c.rbuf[c.r:c.w])
		c.r += n
		if c.r == c.w {
			connBufs.Put(c.rbuf)
			c.rbuf = nil
			c.held.Add(-1)
		}
	}
	c.advance(p[:n])
	return n, nil
}

// frameLimit is how many of the next bytes belong to the frame being read:
// the rest of its payload, or of its header.
func (c *pooledConn) frameLimit() int {
	if c.rleft > 0 {
		return c.rleft
	}
	_, header := frameSize(c.rhdr[:c.rhn])
	return header - c.rhn
}

// advance follows the frames through b, bytes just read (within
// frameLimit).
func (c *pooledConn) advance(b []byte) {
	if c.rleft > 0 {
		c.rleft -= len(b)
		return
	}
	c.rhn += copy(c.rhdr[c.rhn:], b)
	if total, header := frameSize(c.rhdr[:c.rhn]); total > 0 {
		c.rleft, c.rhn = total-header, 0
	}
}

// Write gathers one WebSocket frame and writes it whole: the library writes
// a frame's header and payload in pieces through its small buffer, and a
// frame header says how long the frame is. A frame larger than the pooled
// buffer goes out as a full buffer, then the rest as it comes.
func (c *pooledConn) Write(p []byte) (int, error) {
	done := 0
	for len(p) > 0 {
		if c.through > 0 {
			k := min(len(p), c.through)
			n, err := c.Conn.Write(p[:k])
			done += n
			c.through -= n
			if err != nil {
				return done, err
			}
			p = p[k:]
			continue
		}
		if c.wbuf == nil {
			c.wbuf, c.wn = connBufs.Get().(*[connBufSize]byte), 0
			c.held.Add(1)
		}
		total, header := frameSize(c.wbuf[:c.wn])
		end := header // until the header is whole, gather only the header
		if total > 0 {
			end = min(total, connBufSize)
		}
		k := copy(c.wbuf[c.wn:end], p)
		c.wn += k
		done += k
		p = p[k:]
		if total == 0 { // the header may be whole now
			total, _ = frameSize(c.wbuf[:c.wn])
		}
		if total > 0 && (c.wn == total || c.wn == connBufSize) {
			_, err := c.Conn.Write(c.wbuf[:c.wn])
			c.through = total - c.wn
			c.releaseWrite()
			if err != nil {
				return done, err
			}
		}
	}
	return done, nil
}

func (c *pooledConn) releaseWrite() {
	connBufs.Put(c.wbuf)
	c.wbuf, c.wn = nil, 0
	c.held.Add(-1)
}

// frameSize reads the WebSocket frame header (RFC 6455 §5.2) at the start
// of b. Once b holds the whole header, total is the frame's length, header
// and payload; until then total is 0 and header is how many bytes b must
// hold to tell.
func frameSize(b []byte) (total, header int) {
	if len(b) < 2 {
		return 0, 2
	}
	header = 2
	switch b[1] & 0x7f {
	case 126:
		header += 2
	case 127:
		header += 8
	}
	if b[1]&0x80 != 0 {
		header += 4 // a masking key
	}
	if len(b) < header {
		return 0, header
	}
	var n uint64
	switch b[1] & 0x7f {
	case 126:
		n = uint64(binary.BigEndian.Uint16(b[2:4]))
	case 127:
		n = binary.BigEndian.Uint64(b[2:10])
	default:
		n = uint64(b[1] & 0x7f)
	}
	if n > uint64(math.MaxInt-header) {
		return math.MaxInt, header // passed through, whatever it holds
	}
	return header + int(n), header
}
