package rpc

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"net"
	"testing"

	"github.com/parslee-ai/car-server/internal/testwait"
	"github.com/parslee-ai/car-server/protocol"
)

func TestFrameSize(t *testing.T) {
	long := func(n uint64) []byte {
		b := []byte{0x81, 127, 0, 0, 0, 0, 0, 0, 0, 0}
		binary.BigEndian.PutUint64(b[2:], n)
		return b
	}
	cases := []struct {
		name          string
		b             []byte
		total, header int
	}{
		{"nothing", nil, 0, 2},
		{"one byte", []byte{0x81}, 0, 2},
		{"short", []byte{0x81, 5}, 7, 2},
		{"empty close", []byte{0x88, 0}, 2, 2},
		{"16-bit length, partial", []byte{0x81, 126, 1}, 0, 4},
		{"16-bit length", []byte{0x81, 126, 1, 0}, 4 + 256, 4},
		{"64-bit length", long(70000), 10 + 70000, 10},
		{"masked, key partial", []byte{0x81, 0x85, 1, 2}, 0, 6},
		{"masked", []byte{0x81, 0x85, 1, 2, 3, 4}, 6 + 5, 6},
		{"masked 16-bit", []byte{0x81, 0x80 | 126, 0, 200, 1, 2, 3, 4}, 8 + 200, 8},
		{"past int", long(math.MaxUint64), math.MaxInt, 10},
	}
	for _, tc := range cases {
		total, header := frameSize(tc.b)
		if total != tc.total || header != tc.header {
			t.Errorf("%s: frameSize(% x) = %d, %d; want %d, %d", tc.name, tc.b, total, header, tc.total, tc.header)
		}
	}
}

// frame encodes a WebSocket frame as the library does, masked or not.
func frame(payload []byte, masked bool) []byte {
	var b bytes.Buffer
	b.WriteByte(0x81)
	m := byte(0)
	if masked {
		m = 0x80
	}
	switch n := len(payload); {
	case n > math.MaxUint16:
		b.WriteByte(m | 127)
		_ = binary.Write(&b, binary.BigEndian, uint64(n))
	case n > 125:
		b.WriteByte(m | 126)
		_ = binary.Write(&b, binary.BigEndian, uint16(n))
	default:
		b.WriteByte(m | byte(n))
	}
	if masked {
		b.Write([]byte{1, 2, 3, 4}) // the key; the payload is left as is
	}
	b.Write(payload)
	return b.Bytes()
}

// recordingConn records each write; its reads come from r in pieces of at
// most chunk bytes, as a socket's would.
type recordingConn struct {
	net.Conn
	writes [][]byte
	r      io.Reader
	chunk  int
	reads  int
}

func (c *recordingConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, append([]byte(nil), p...))
	return len(p), nil
}

func (c *recordingConn) Read(p []byte) (int, error) {
	c.reads++
	return c.r.Read(p[:min(len(p), c.chunk)])
}

// TestPooledConnWritesEachFrameInOneWrite writes frames the way the
// WebSocket library does (header, then payload, through its small buffer):
// a frame that fits the pooled buffer goes out in one write, a larger one
// passes through whole, and no buffer is held between frames.
func TestPooledConnWritesEachFrameInOneWrite(t *testing.T) {
	rec := &recordingConn{}
	pc := newPooledConn(rec, nil)
	bw := bufio.NewWriterSize(pc, wsWriteBufSize)
	var want bytes.Buffer
	for _, n := range []int{0, 5, 60, 125, 126, 1000, connBufSize - 4, connBufSize, 70000} {
		payload := bytes.Repeat([]byte{'x'}, n)
		f := frame(payload, false)
		header := len(f) - n
		before := len(rec.writes)
		if _, err := bw.Write(f[:1]); err != nil {
			t.Fatal(err)
		}
		if _, err := bw.Write(f[1:header]); err != nil {
			t.Fatal(err)
		}
		if _, err := bw.Write(payload); err != nil {
			t.Fatal(err)
		}
		if err := bw.Flush(); err != nil {
			t.Fatal(err)
		}
		want.Write(f)
		writes := len(rec.writes) - before
		if len(f) <= connBufSize && writes != 1 {
			t.Errorf("a %d-byte frame took %d writes, want 1", len(f), writes)
		}
		if len(f) > connBufSize && (writes != 2 || len(rec.writes[before]) != connBufSize) {
			t.Errorf("a %d-byte frame took %d writes, want a full buffer and the rest", len(f), writes)
		}
		if pc.wbuf != nil || pc.held.Load() != 0 {
			t.Fatalf("after a %d-byte frame the connection holds %d buffers", len(f), pc.held.Load())
		}
	}
	if got := bytes.Join(rec.writes, nil); !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("the bytes written differ from the frames (%d bytes, want %d)", len(got), want.Len())
	}
}

// TestPooledConnReadsStopAtFrameEnds reads frames through the library's
// small reader, the first ones from the bytes read before the hand-over:
// once a frame is read, nothing past it waits in that reader, and once the
// connection's bytes are read it holds no buffer.
func TestPooledConnReadsStopAtFrameEnds(t *testing.T) {
	sizes := []int{3, 0, 200, 125, 5000, 1, 70000, 40}
	var stream bytes.Buffer
	var payloads [][]byte
	for i, n := range sizes {
		p := bytes.Repeat([]byte{byte('a' + i)}, n)
		payloads = append(payloads, p)
		stream.Write(frame(p, true))
	}
	all := stream.Bytes()
	for _, chunk := range []int{1, 7, 100, connBufSize, 1 << 20} {
		early := all[:9]
		rec := &recordingConn{r: bytes.NewReader(all[9:]), chunk: chunk}
		pc := newPooledConn(rec, append([]byte(nil), early...))
		br := bufio.NewReaderSize(pc, wsReadBufSize)
		for i, want := range payloads {
			pc.awaitData()
			h := make([]byte, 2)
			if _, err := io.ReadFull(br, h); err != nil {
				t.Fatalf("chunk %d, frame %d: %v", chunk, i, err)
			}
			rest := []byte{}
			switch h[1] & 0x7f {
			case 126:
				rest = make([]byte, 2)
			case 127:
				rest = make([]byte, 8)
			}
			rest = append(rest, 0, 0, 0, 0) // the masking key
			if _, err := io.ReadFull(br, rest); err != nil {
				t.Fatal(err)
			}
			total, header := frameSize(append(h, rest...))
			got := make([]byte, total-header)
			if _, err := io.ReadFull(br, got); err != nil {
				t.Fatalf("chunk %d, frame %d: %v", chunk, i, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("chunk %d, frame %d: payload differs", chunk, i)
			}
			if br.Buffered() != 0 {
				t.Fatalf("chunk %d, frame %d: the reader holds %d bytes past the frame's end", chunk, i, br.Buffered())
			}
		}
		if _, err := br.ReadByte(); err != io.EOF {
			t.Fatalf("chunk %d: after the last frame want EOF, got %v", chunk, err)
		}
		if pc.held.Load() != 0 {
			t.Fatalf("chunk %d: %d buffers held after every byte was read", chunk, pc.held.Load())
		}
	}
}

// TestIdleConnectionsHoldNoBuffers: after traffic in both directions, a
// connection that has nothing to read or write holds no pooled buffer.
func TestIdleConnectionsHoldNoBuffers(t *testing.T) {
	ts := startServer(t, Options{Token: "tok"})
	var conns []*conn
	for range 3 {
		c := ts.dial(t, "tok")
		for range 5 {
			if err := c.Call(ctxT(t), protocol.MethodStateExists, map[string]any{"key": "k"}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	ts.srv.mu.Lock()
	for c := range ts.srv.conns {
		conns = append(conns, c)
	}
	ts.srv.mu.Unlock()
	if len(conns) != 3 {
		t.Fatalf("%d connections, want 3", len(conns))
	}
	// A writer gives its buffer back just after the peer may have read the
	// frame, so this is eventual.
	for _, c := range conns {
		if c.socket == nil {
			t.Fatal("the connection was not handed pooled buffers")
		}
		testwait.Eventually(t, testTimeout, "an idle connection to hold no buffer", func() bool { return c.socket.held.Load() == 0 })
	}
}
