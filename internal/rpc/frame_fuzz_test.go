package rpc

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"testing"

	"github.com/sourcegraph/jsonrpc2"
)

// frameSeeds are the frames the frame tests send, and the ones fuzzing found
// that the check passed but the JSON-RPC layer could not decode.
var frameSeeds = []string{
	`{"jsonrpc":"2.0",`,
	`[{"jsonrpc":"2.0","id":1,"method":"state.keys"}]`,
	`42`,
	`{"id":7,"method":"state.keys"}`,
	`{"jsonrpc":"1.0","id":8,"method":"state.keys"}`,
	`{"jsonrpc":"2.0","id":9}`,
	`{"jsonrpc":"2.0","id":10,"method":5}`,
	`{"jsonrpc":"2.0","id":1.5,"method":"state.keys"}`,
	`{"jsonrpc":"2.0","id":-1,"method":"state.keys"}`,
	`{"jsonrpc":"2.0","id":11,"method":"state.keys","result":1}`,
	`{"jsonrpc":"2.0","id":12,"method":"state.nope"}`,
	`{"jsonrpc":"2.0","id":"abc","method":"tools.unregister","params":{}}`,
	`{"jsonrpc":"2.0","id":3,"result":{"ok":true}}`,
	`{"jsonrpc":"2.0","id":4,"error":{"code":-32000,"message":"no","data":[1]}}`,
	`{"jsonrpC":"2.0","Method":"0"}`,
	`{"jsonrpc":"2.0","ID":1,"method":"state.keys"}`,
	`{"jsonrpc":"2.0","id":5,"error":null}`,
	`{"jsonrpc":"2.0","id":5,"error":5}`,
	`{"jsonrpc":"2.0","id":5,"error":"x"}`,
	`{"jsonrpc":"2.0","id":5,"error":{"code":"x"}}`,
	`{"jsonrpc":"2.0","id":9223372036854775808,"method":"state.keys"}`,
	`{"jsonrpc":"2.0","id":18446744073709551615,"method":"state.keys"}`,
	`{"jsonrpc":"2.0","id":6,"result":1e700}`,
}

// FuzzCheckFrame holds the frame check's promise: every frame it passes is
// one the JSON-RPC library's own decoder accepts, and every frame it stops
// gets an error reply.
func FuzzCheckFrame(f *testing.F) {
	for _, s := range frameSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		pass, reply := checkFrame(frame)
		if pass == nil {
			var rep struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   *jsonrpc2.Error `json:"error"`
			}
			if err := json.Unmarshal(reply, &rep); err != nil || rep.Error == nil || rep.Error.Message == "" {
				t.Fatalf("frame %q was stopped without an error reply: %s (%v)", frame, reply, err)
			}
			return
		}
		if err := libraryDecode(pass); err != nil {
			t.Fatalf("the frame check passed %q but the JSON-RPC library cannot decode it: %v", frame, err)
		}
	})
}

// libraryDecode hands frame to a jsonrpc2.Conn exactly as the daemon's stream
// does and returns the error its decoder met, if any.
func libraryDecode(frame []byte) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &oneFrameStream{frame: frame, decoded: make(chan error, 1), done: ctx.Done()}
	c := jsonrpc2.NewConn(ctx, s, noopHandler{}, jsonrpc2.SetLogger(log.New(io.Discard, "", 0)))
	err := <-s.decoded
	cancel()
	<-c.DisconnectNotify()
	return err
}

// oneFrameStream yields one frame, then blocks until the test is done.
type oneFrameStream struct {
	frame   []byte
	decoded chan error
	done    <-chan struct{}
	read    bool
}

func (s *oneFrameStream) ReadObject(v any) error {
	if s.read {
		<-s.done
		return io.EOF
	}
	s.read = true
	err := json.Unmarshal(s.frame, v)
	s.decoded <- err
	return err
}

func (s *oneFrameStream) WriteObject(any) error { return nil }
func (s *oneFrameStream) Close() error          { return nil }

type noopHandler struct{}

func (noopHandler) Handle(context.Context, *jsonrpc2.Conn, *jsonrpc2.Request) {}
