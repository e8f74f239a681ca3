// Package wsstream adapts a WebSocket connection to jsonrpc2.ObjectStream:
// one JSON-RPC message per text frame, in both directions.
//
// Both the daemon and the Go client use it; the daemon adds a frame check
// that answers malformed frames itself instead of tearing the connection down.
package wsstream

import (
	"context"
	"encoding/json"
	"errors"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
)

// Check inspects a frame before it is decoded. It returns the frame to
// decode (the one it was given, or a rewritten one), or nil to drop it, with
// reply (when non-nil) written back.
type Check func(frame []byte) (pass, reply []byte)

// Stream is a jsonrpc2.ObjectStream over a WebSocket connection.
type Stream struct {
	conn         *websocket.Conn
	ctx          context.Context
	writeTimeout time.Duration
	check        Check
}

// New returns a Stream reading under ctx. Writes give up after writeTimeout
// (0 means 30 s), which closes the connection: a peer that stops reading
// cannot stall its writers forever. check may be nil.
func New(ctx context.Context, conn *websocket.Conn, writeTimeout time.Duration, check Check) *Stream {
	if writeTimeout <= 0 {
		writeTimeout = 30 * time.Second
	}
	return &Stream{conn: conn, ctx: ctx, writeTimeout: writeTimeout, check: check}
}

// ReadObject reads the next frame that passes the check into v.
func (s *Stream) ReadObject(v any) error {
	for {
		typ, data, err := s.conn.Read(s.ctx)
		if err != nil {
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
		return json.Unmarshal(data, v)
	}
}

// WriteObject writes v as one text frame.
func (s *Stream) WriteObject(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.write(lowerNegativeID(data))
}

func (s *Stream) write(data []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.writeTimeout)
	defer cancel()
	return s.conn.Write(ctx, websocket.MessageText, data)
}

// Close closes the connection with a normal closure.
func (s *Stream) Close() error {
	return s.conn.Close(websocket.StatusNormalClosure, "")
}
