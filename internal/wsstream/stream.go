// Package wsstream adapts a WebSocket connection to jsonrpc2.ObjectStream:
// one JSON-RPC message per text frame, in both directions.
//
// Both the daemon and the Go client use it; the daemon adds a frame check
// that answers malformed frames itself instead of tearing the connection down.
// It reads and writes the library's messages itself (codec.go), in one pass
// over a frame, and carries a call's params and result past the library's
// encoding (calls.go).
package wsstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
)

// Check inspects a frame before it is decoded. It returns the frame to
// decode (the one it was given, or a rewritten one), or nil to drop it, with
// reply (when non-nil) written back. A frame it passes must be valid JSON:
// the stream does not check it again.
type Check func(frame []byte) (pass, reply []byte)

// Stream is a jsonrpc2.ObjectStream over a WebSocket connection.
type Stream struct {
	conn         *websocket.Conn
	ctx          context.Context
	writeTimeout time.Duration
	check        Check

	// Reads and writes take no context of their own, which would cost a
	// timer or a context registration per frame: the end of ctx closes the
	// connection once (stopRead), and one timer bounds the write under way.
	stopRead  func() bool
	writeMu   sync.Mutex
	writeLate *time.Timer // closes the connection when a write overruns
	overran   atomic.Bool // writeLate fired
}

// DefaultWriteTimeout bounds a write when New is given none.
const DefaultWriteTimeout = 30 * time.Second

// New returns a Stream reading until ctx ends, which closes the connection.
// Writes give up after writeTimeout (0 means DefaultWriteTimeout), which closes the
// connection: a peer that stops reading cannot stall its writers forever.
// check may be nil.
func New(ctx context.Context, conn *websocket.Conn, writeTimeout time.Duration, check Check) *Stream {
	if writeTimeout <= 0 {
		writeTimeout = DefaultWriteTimeout
	}
	s := &Stream{conn: conn, ctx: ctx, writeTimeout: writeTimeout, check: check}
	s.stopRead = context.AfterFunc(ctx, func() { _ = conn.CloseNow() })
	return s
}

// ReadObject reads the next frame that passes the check into v.
func (s *Stream) ReadObject(v any) error {
	for {
		typ, data, err := s.read()
		if err != nil {
			if s.ctx.Err() != nil {
				return s.ctx.Err()
			}
			return err
		}
		if typ == websocket.MessageText && !utf8.Valid(data) {
			// RFC 6455 §8.1: a text frame that is not UTF-8 fails the connection.
			_ = s.conn.Close(websocket.StatusInvalidFramePayloadData, "a text frame must be valid UTF-8")
			return errors.New("the peer sent a text frame that is not valid UTF-8; closed with 1007")
		}
		if s.check != nil {
			pass, reply := s.check(data)
			if pass == nil {
				if reply != nil {
					if err := s.write(lowerNegativeID(reply)); err != nil {
						return err
					}
				}
				continue
			}
			data = pass
		}
		return decodeInto(data, v, s.check != nil)
	}
}

// read reads the next frame into a fresh slice of its exact size (the
// decoded message keeps slices of it), through a pooled buffer.
func (s *Stream) read() (websocket.MessageType, []byte, error) {
	typ, r, err := s.conn.Reader(context.Background())
	if err != nil {
		return 0, nil, err
	}
	bp := buffers.Get()
	b := *bp
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, nil, err
		}
	}
	data := bytes.Clone(b)
	*bp = b
	buffers.Put(bp)
	return typ, data, nil
}

// WriteObject writes v as one text frame.
func (s *Stream) WriteObject(v any) error {
	bp := buffers.Get()
	defer buffers.Put(bp)
	data, ok := encode(*bp, v)
	*bp = data
	if !ok {
		var err error
		if data, err = json.Marshal(v); err != nil {
			return err
		}
		data = lowerNegativeID(data)
	}
	return s.write(data)
}

// write sends one text frame; it closes the connection when the frame is
// not written within the write timeout.
func (s *Stream) write(data []byte) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if s.writeLate == nil {
		s.writeLate = time.AfterFunc(s.writeTimeout, s.overrun)
	} else {
		s.writeLate.Reset(s.writeTimeout)
	}
	err := s.conn.Write(context.Background(), websocket.MessageText, data)
	s.writeLate.Stop()
	if err != nil && s.overran.Load() {
		return s.OverrunError()
	}
	return err
}

// OverrunError is what a write that missed the write timeout failed with:
// it wraps context.DeadlineExceeded.
func (s *Stream) OverrunError() error {
	return fmt.Errorf("the peer took no frame for %s; closed the connection: %w", s.writeTimeout, context.DeadlineExceeded)
}

// Overran reports whether a write missed the write timeout, which closed
// the connection. The JSON-RPC library reports a write failing as the
// connection ends as closed; this says why it closed.
func (s *Stream) Overran() bool { return s.overran.Load() }

// overrun ends a write that took longer than the write timeout.
func (s *Stream) overrun() {
	s.overran.Store(true)
	_ = s.conn.CloseNow()
}

// Close closes the connection with a normal closure.
func (s *Stream) Close() error {
	s.stopRead()
	return s.conn.Close(websocket.StatusNormalClosure, "")
}
