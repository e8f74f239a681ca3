package mcpserve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ErrDaemonDown is Forward's error when the daemon's endpoint cannot be
// reached, or goes away while the client is still there.
var ErrDaemonDown = errors.New("the car-server daemon is not reachable")

// Forward serves one MCP client on in and out (a stdio client: car-server
// mcp) by forwarding it to the daemon's endpoint with token: one session
// there for the client's one session here, so the daemon governs every
// call exactly as it does an HTTP client's, under the token's principal.
// tools/list and tools/call go to the daemon, with their progress
// notifications (a wait for a person) coming back; everything else the SDK
// answers here. Forward returns nil when the client closes in, and an
// error wrapping ErrDaemonDown when the daemon cannot be reached or goes
// away.
func Forward(ctx context.Context, in io.ReadCloser, out io.WriteCloser, endpoint, token, version string) error {
	up := &upstream{}
	client := mcp.NewClient(&mcp.Implementation{Name: "car-server-mcp", Version: version}, &mcp.ClientOptions{
		ProgressNotificationHandler: up.progress,
	})
	tr := &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearerTransport{token: token}}, DisableStandaloneSSE: true}
	cs, err := client.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: ProtocolRevision})
	if err != nil {
		return fmt.Errorf("%w at %s: %v", ErrDaemonDown, endpoint, err)
	}
	defer cs.Close()

	server := mcp.NewServer(&mcp.Implementation{Name: "car-server", Version: version}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			// The request's context carries this side's negotiated
			// revision, which the daemon's side must not take for its own:
			// only its cancellation passes.
			uctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			defer context.AfterFunc(ctx, cancel)()
			switch r := req.(type) {
			case *mcp.ListToolsRequest:
				var p mcp.ListToolsParams
				if r.Params != nil {
					p.Cursor = r.Params.Cursor
				}
				return cs.ListTools(uctx, &p)
			case *mcp.CallToolRequest:
				up.setSession(r.Session)
				// Of the _meta, the progress token and the idempotency key go
				// up: the rest (this side's revision) is not the daemon's.
				p := &mcp.CallToolParams{Name: r.Params.Name, Arguments: r.Params.Arguments}
				p.Meta = mcp.Meta{}
				if token := r.Params.GetProgressToken(); token != nil {
					// As it came: a JSON number decodes as float64, which
					// SetProgressToken refuses.
					p.Meta["progressToken"] = token
				}
				if key, ok := r.Params.Meta[IdempotencyKeyMetaKey].(string); ok {
					p.Meta[IdempotencyKeyMetaKey] = key
				}
				if len(r.Params.Arguments) == 0 {
					p.Arguments = map[string]any{}
				}
				return cs.CallTool(uctx, p)
			}
			return next(ctx, method, req)
		}
	})
	ss, err := server.Connect(ctx, &mcp.IOTransport{Reader: in, Writer: out}, nil)
	if err != nil {
		return err
	}
	gone := make(chan error, 1)
	go func() { gone <- cs.Wait() }()
	closed := make(chan error, 1)
	go func() { closed <- ss.Wait() }()
	select {
	case <-closed: // the client closed its stdin
		return nil
	case err := <-gone:
		_ = ss.Close()
		<-closed
		return fmt.Errorf("%w at %s: the session ended: %v", ErrDaemonDown, endpoint, err)
	case <-ctx.Done():
		_ = ss.Close()
		<-closed
		return nil
	}
}

// upstream passes the daemon's progress notifications on to the client;
// the progress token is the client's own, carried up in the call's _meta.
type upstream struct {
	mu sync.Mutex
	ss *mcp.ServerSession
}

func (u *upstream) setSession(ss *mcp.ServerSession) {
	u.mu.Lock()
	u.ss = ss
	u.mu.Unlock()
}

func (u *upstream) progress(ctx context.Context, r *mcp.ProgressNotificationClientRequest) {
	u.mu.Lock()
	ss := u.ss
	u.mu.Unlock()
	if ss != nil {
		_ = ss.NotifyProgress(ctx, r.Params)
	}
}

// bearerTransport puts the token on every request to the daemon.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return http.DefaultTransport.RoundTrip(r)
}
