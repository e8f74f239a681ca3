package wsstream

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testTimeout bounds every wait; it is a hang guard, not a performance
// assertion.
const testTimeout = 10 * time.Second

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// pair returns the two ends of a real WebSocket connection over loopback:
// the accepted (server) end and the dialed (peer) end.
func pair(t *testing.T) (server, peer *websocket.Conn) {
	t.Helper()
	accepted := make(chan *websocket.Conn, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			t.Errorf("accept: %v", err)
			return
		}
		accepted <- ws
	}))
	t.Cleanup(srv.Close)
	ctx := ctxT(t)
	peer, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	select {
	case server = <-accepted:
	case <-ctx.Done():
		t.Fatal("server never accepted the connection")
	}
	t.Cleanup(func() {
		server.CloseNow()
		peer.CloseNow()
	})
	return server, peer
}

func TestWriteObjectIsOneTextFrame(t *testing.T) {
	server, peer := pair(t)
	s := New(ctxT(t), server, 0, nil)
	if err := s.WriteObject(map[string]any{"jsonrpc": "2.0", "method": "a"}); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteObject(map[string]any{"jsonrpc": "2.0", "method": "b"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`{"jsonrpc":"2.0","method":"a"}`, `{"jsonrpc":"2.0","method":"b"}`} {
		typ, data, err := peer.Read(ctxT(t))
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if typ != websocket.MessageText || string(data) != want {
			t.Fatalf("frame = %v %s, want text %s", typ, data, want)
		}
	}
}

func TestWriteObjectUnencodable(t *testing.T) {
	server, _ := pair(t)
	s := New(ctxT(t), server, 0, nil)
	var ue *json.UnsupportedTypeError
	if err := s.WriteObject(make(chan int)); !errors.As(err, &ue) {
		t.Fatalf("WriteObject(chan) = %v, want *json.UnsupportedTypeError", err)
	}
}

func TestReadObjectFraming(t *testing.T) {
	server, peer := pair(t)
	s := New(ctxT(t), server, 0, nil)
	for _, f := range []string{`{"n":1}`, `{"n":2}`, `{"n":3}{"n":4}`} {
		if err := peer.Write(ctxT(t), websocket.MessageText, []byte(f)); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	for want := 1; want <= 2; want++ {
		var v struct{ N int }
		if err := s.ReadObject(&v); err != nil {
			t.Fatalf("read %d: %v", want, err)
		}
		if v.N != want {
			t.Fatalf("frame %d decoded as n=%d", want, v.N)
		}
	}
	// A frame is one JSON value: two objects in one frame are malformed.
	var v struct{ N int }
	var se *json.SyntaxError
	if err := s.ReadObject(&v); !errors.As(err, &se) {
		t.Fatalf("two objects in one frame: err = %v, want *json.SyntaxError", err)
	}
}

func TestCheckRejectsFrame(t *testing.T) {
	server, peer := pair(t)
	var seen []string
	check := func(frame []byte) ([]byte, []byte) {
		seen = append(seen, string(frame))
		switch string(frame) {
		case "not json":
			return nil, []byte(`{"error":"parse"}`)
		case "silent":
			return nil, nil
		case `{"n":0}`:
			return []byte(`{"n":1}`), nil // the check may rewrite what is decoded
		}
		return frame, nil
	}
	s := New(ctxT(t), server, 0, check)
	for _, f := range []string{"not json", "silent", `{"n":0}`} {
		if err := peer.Write(ctxT(t), websocket.MessageText, []byte(f)); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	var v struct{ N int }
	if err := s.ReadObject(&v); err != nil {
		t.Fatalf("read: %v", err)
	}
	if v.N != 1 {
		t.Fatalf("ReadObject returned n=%d, want the frame the check passed, as it rewrote it (n=1)", v.N)
	}
	if want := []string{"not json", "silent", `{"n":0}`}; strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Fatalf("check saw %q, want %q", seen, want)
	}
	// Only the rejection that carried a reply was answered.
	_, data, err := peer.Read(ctxT(t))
	if err != nil {
		t.Fatalf("read reply: %v", err)
	}
	if string(data) != `{"error":"parse"}` {
		t.Fatalf("reply = %s", data)
	}
	if err := s.WriteObject(map[string]int{"after": 1}); err != nil {
		t.Fatal(err)
	}
	if _, data, err := peer.Read(ctxT(t)); err != nil || string(data) != `{"after":1}` {
		t.Fatalf("next frame = %s, %v; want {\"after\":1} (no reply for the silent rejection)", data, err)
	}
}

func TestOversizedFrameClosesWith1009(t *testing.T) {
	server, peer := pair(t)
	server.SetReadLimit(16)
	s := New(ctxT(t), server, 0, nil)
	readErr := make(chan error, 1)
	go func() {
		var v any
		readErr <- s.ReadObject(&v)
	}()
	if err := peer.Write(ctxT(t), websocket.MessageText, []byte(`{"padding":"`+strings.Repeat("x", 64)+`"}`)); err != nil {
		t.Fatalf("write: %v", err)
	}
	_, _, err := peer.Read(ctxT(t))
	if got := websocket.CloseStatus(err); got != websocket.StatusMessageTooBig {
		t.Fatalf("peer read: %v (close status %d), want close status %d", err, got, websocket.StatusMessageTooBig)
	}
	select {
	case err := <-readErr:
		if err == nil {
			t.Fatal("ReadObject of an oversized frame returned no error")
		}
	case <-ctxT(t).Done():
		t.Fatal("ReadObject did not return after the oversized frame")
	}
}

func TestCloseIsNormalClosure(t *testing.T) {
	server, peer := pair(t)
	s := New(ctxT(t), server, 0, nil)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	// The peer reads, which answers the close handshake.
	_, _, err := peer.Read(ctxT(t))
	if got := websocket.CloseStatus(err); got != websocket.StatusNormalClosure {
		t.Fatalf("peer read: %v (close status %d), want %d", err, got, websocket.StatusNormalClosure)
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-ctxT(t).Done():
		t.Fatal("Close did not return")
	}
}

// A peer that stops reading must not stall a writer: once the socket
// buffers fill, the write gives up with its deadline and fails.
func TestWriteTimeoutUnblocksWriter(t *testing.T) {
	server, _ := pair(t) // the peer never reads
	s := New(ctxT(t), server, 10*time.Millisecond, nil)
	big := strings.Repeat("x", 1<<20)
	writeErr := make(chan error, 1)
	go func() {
		for range 256 {
			if err := s.WriteObject(big); err != nil {
				writeErr <- err
				return
			}
		}
		writeErr <- nil
	}()
	select {
	case err := <-writeErr:
		if err == nil {
			t.Fatal("256 MiB written to a peer that never reads; the write timeout never fired")
		}
		// The deadline closes the connection; the write reports either the
		// deadline or the closed connection, whichever it sees first.
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, net.ErrClosed) {
			t.Fatalf("write failed with %v, want the write deadline (or the connection it closed)", err)
		}
	case <-ctxT(t).Done():
		t.Fatal("writer still blocked on a peer that never reads")
	}
}

func TestCancelUnblocksRead(t *testing.T) {
	server, _ := pair(t) // the peer never writes
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := New(ctx, server, 0, nil)
	readErr := make(chan error, 1)
	go func() {
		var v any
		readErr <- s.ReadObject(&v)
	}()
	cancel()
	select {
	case err := <-readErr:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("ReadObject after cancel = %v, want context.Canceled", err)
		}
	case <-ctxT(t).Done():
		t.Fatal("ReadObject still blocked after its context was cancelled")
	}
}
