package mcpserve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioClient runs Forward on pipes and connects an SDK client to it, as
// an MCP client launching car-server mcp would.
func stdioClient(t *testing.T, f *fixture, token string, progress func(*mcp.ProgressNotificationClientRequest)) (*mcp.ClientSession, <-chan error) {
	t.Helper()
	cin, sout := io.Pipe() // what Forward writes, the client reads
	sin, cout := io.Pipe() // what the client writes, Forward reads
	done := make(chan error, 1)
	go func() {
		done <- Forward(context.Background(), sin, sout, f.url, token, "test")
		_ = sout.Close()
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "stdio-client", Version: "1"}, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		if progress != nil {
			progress(r)
		}
	}})
	cs, err := c.Connect(ctxT(t), &mcp.IOTransport{Reader: cin, Writer: cout}, nil)
	if err != nil {
		t.Fatalf("connect over stdio: %v", err)
	}
	return cs, done
}

func TestForwardServesAStdioClientThroughTheEndpoint(t *testing.T) {
	f := start(t, Options{})
	ids := make(chan string, 1)
	cs, done := stdioClient(t, f, scoutToken, func(r *mcp.ProgressNotificationClientRequest) {
		if id, ok := r.Params.Meta["car-server/approval_id"].(string); ok {
			ids <- id
		}
	})
	res, err := cs.ListTools(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	// The scout agent's principal, through the forwarder.
	if got := strings.Join(names(res.Tools), ","); got != "mcp_fake_read" {
		t.Fatalf("tools over stdio = %s, want mcp_fake_read (the agent scout's)", got)
	}
	call, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp_fake_read", Arguments: map[string]any{"path": "c.txt"}})
	if err != nil || call.IsError || text(call) != `echo {"path":"c.txt"}` {
		t.Fatalf("call over stdio = %+v %v", call, err)
	}
	denied, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp_fake_write", Arguments: map[string]any{}})
	if err != nil || !denied.IsError || !strings.Contains(text(denied), "agent 'scout' may not take full_access actions") {
		t.Fatalf("denied call over stdio = %+v %v, want isError naming the posture", denied, err)
	}
	// The client closes stdin: Forward returns nil.
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Forward after stdin closed: %v, want nil", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("Forward did not return after stdin closed")
	}
}

func TestForwardPassesProgressOfAWaitForAPerson(t *testing.T) {
	f := start(t, Options{})
	ids := make(chan string, 1)
	cs, _ := stdioClient(t, f, plainToken, func(r *mcp.ProgressNotificationClientRequest) {
		if id, ok := r.Params.Meta["car-server/approval_id"].(string); ok && fmt.Sprint(r.Params.ProgressToken) == "7" {
			ids <- id
		}
	})
	defer cs.Close()
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "mcp_fake_write", Arguments: map[string]any{"path": "d.txt"}}
		p.SetProgressToken(7) // a number, as the TypeScript SDK sends it
		res, err := cs.CallTool(context.Background(), p)
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		done <- res
	}()
	var id string
	select {
	case id = <-ids:
	case <-time.After(testTimeout):
		t.Fatal("no progress notification reached the stdio client")
	}
	if _, err := f.rt.ResolveApproval("person", engineDecision(id)); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if res.IsError || text(res) != `echo {"path":"d.txt"}` {
			t.Fatalf("after the approval: %q", text(res))
		}
	case <-time.After(testTimeout):
		t.Fatal("the call did not return after the approval")
	}
}

func TestForwardSaysTheDaemonIsDown(t *testing.T) {
	f := start(t, Options{})
	url := f.url
	err := Forward(context.Background(), io.NopCloser(strings.NewReader("")), nopWriteCloser{io.Discard}, strings.Replace(url, "/mcp", "/nothing-here", 1)+"x", plainToken, "test")
	if !errors.Is(err, ErrDaemonDown) {
		t.Fatalf("Forward to no endpoint: %v, want ErrDaemonDown", err)
	}
	err = Forward(context.Background(), io.NopCloser(strings.NewReader("")), nopWriteCloser{io.Discard}, url, "wrong", "test")
	if !errors.Is(err, ErrDaemonDown) || !strings.Contains(err.Error(), "Unauthorized") {
		t.Fatalf("Forward with a wrong token: %v, want ErrDaemonDown saying Unauthorized", err)
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
