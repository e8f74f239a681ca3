package ui_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.opentelemetry.io/otel/trace"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/rpc"
	"github.com/parslee-ai/car-server/internal/store/file"
	"github.com/parslee-ai/car-server/protocol"
)

// waitTimeout bounds every wait; it is a hang guard, not a performance
// assertion.
const waitTimeout = 20 * time.Second

const authToken = "agent-token-for-the-dashboard-tests"

// daemon is a real rpc server with an approval ledger on a loopback port,
// which a test can stop and start again on the same port.
type daemon struct {
	t         *testing.T
	addr      string // host:port, fixed across restarts
	dir       string
	hostToken string
	srv       *rpc.Server
	rt        *engine.Runtime
	served    chan error
	ledger    *file.Approvals
	tracer    trace.Tracer // tracing on when set
	traceURL  string       // otel_trace_url
}

func startDaemon(t *testing.T, hostToken string) *daemon {
	t.Helper()
	d := &daemon{t: t, dir: t.TempDir(), hostToken: hostToken}
	d.start("127.0.0.1:0")
	t.Cleanup(d.stop)
	return d
}

func (d *daemon) start(addr string) {
	d.t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		d.t.Fatalf("listen on %s: %v", addr, err)
	}
	d.addr = l.Addr().String()
	ledger, _, err := file.OpenApprovals(filepath.Join(d.dir, "approvals.jsonl"))
	if err != nil {
		d.t.Fatal(err)
	}
	d.ledger = ledger
	rt := engine.NewRuntime(engine.Options{State: file.NewState(), Approvals: ledger, ApprovalTimeout: waitTimeout, SupervisionTimeout: waitTimeout, Tracer: d.tracer})
	d.rt = rt
	d.srv = rpc.NewServer(rt, rpc.Options{Token: authToken, HostToken: d.hostToken, Home: d.dir, Version: "test", AgentTokens: file.TokenFile(d.tokenFile()), Tracer: d.tracer, TraceURL: d.traceURL})
	d.served = make(chan error, 1)
	go func() { d.served <- d.srv.Serve(l) }()
}

// stop shuts the daemon down and waits for it; a second stop does nothing.
func (d *daemon) stop() {
	if d.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := d.srv.Shutdown(ctx); err != nil {
		d.t.Errorf("shutdown: %v", err)
	}
	if err := <-d.served; err != nil {
		d.t.Errorf("serve: %v", err)
	}
	d.rt.Close()
	if err := d.ledger.Close(); err != nil {
		d.t.Errorf("close the ledger: %v", err)
	}
	d.srv = nil
}

// restart stops the daemon and starts a new one on the same port, with
// hostToken.
func (d *daemon) restart(hostToken string) {
	d.t.Helper()
	d.stop()
	d.hostToken = hostToken
	d.start(d.addr)
}

func (d *daemon) wsURL() string { return "ws://" + d.addr + "/" }

// tokenFile holds the agents' tokens.
func (d *daemon) tokenFile() string { return filepath.Join(d.dir, "agent-tokens.json") }

// pageURL is what car-server dashboard prints.
func (d *daemon) pageURL() string { return "http://" + d.addr + "/ui/#host_token=" + d.hostToken }

// runner is an agent: it registers tools and serves their callbacks.
type runner struct {
	*client.Client
	calls   chan protocol.ToolExecuteParams
	cancels chan protocol.ToolCancelParams
}

// tool is what a runner's tool does with a call.
type tool func(ctx context.Context, call protocol.ToolExecuteParams) (any, error)

func newRunner(t *testing.T, d *daemon, tools map[string]tool) *runner {
	t.Helper()
	return newRunnerAs(t, d, &client.Options{Token: authToken}, tools)
}

// newAgentRunner is a runner bound to agent id, with a token issued for it.
func newAgentRunner(t *testing.T, d *daemon, id string, tools map[string]tool) *runner {
	t.Helper()
	token := "token-of-" + id
	if err := file.IssueToken(ctxT(t), d.tokenFile(), id, token); err != nil {
		t.Fatal(err)
	}
	return newRunnerAs(t, d, &client.Options{Token: token, AgentID: id}, tools)
}

// newRunnerAs is a runner connected with opts.
func newRunnerAs(t *testing.T, d *daemon, opts *client.Options, tools map[string]tool) *runner {
	t.Helper()
	c, err := client.Dial(ctxT(t), d.wsURL(), opts)
	if err != nil {
		t.Fatalf("dial the daemon: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	r := &runner{Client: c, calls: make(chan protocol.ToolExecuteParams, 16), cancels: make(chan protocol.ToolCancelParams, 16)}
	c.HandleRequest(protocol.MethodToolsExecute, func(ctx context.Context, raw json.RawMessage) (any, error) {
		var call protocol.ToolExecuteParams
		if err := json.Unmarshal(raw, &call); err != nil {
			return nil, err
		}
		r.calls <- call
		f := tools[call.Tool]
		if f == nil {
			return nil, fmt.Errorf("unknown tool %s", call.Tool)
		}
		return f(ctx, call)
	})
	c.HandleNotification(protocol.MethodToolsCancel, func(raw json.RawMessage) {
		var p protocol.ToolCancelParams
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Errorf("tools.cancel: %v: %s", err, raw)
			return
		}
		r.cancels <- p
	})
	defs := make([]protocol.ToolSchema, 0, len(tools))
	for name := range tools {
		defs = append(defs, protocol.ToolSchema{Name: name})
	}
	if err := c.Call(ctxT(t), protocol.MethodToolsRegister, defs, nil); err != nil {
		t.Fatalf("tools.register: %v", err)
	}
	return r
}

func echo(_ context.Context, call protocol.ToolExecuteParams) (any, error) {
	return map[string]any{"ok": true, "tool": call.Tool}, nil
}

// submission is a proposal.submit in flight.
type submission struct {
	done chan struct{}
	res  protocol.ProposalResult
	err  error
}

// submit sends a one-action proposal without waiting for its result; wait
// collects it. The test waits for it before it ends.
func (r *runner) submit(t *testing.T, id, toolName string, params map[string]any) *submission {
	t.Helper()
	s := &submission{done: make(chan struct{})}
	prop := map[string]any{"proposal": map[string]any{"id": id, "actions": []any{
		map[string]any{"id": "a1", "type": "tool_call", "tool": toolName, "parameters": params},
	}}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	go func() {
		defer close(s.done)
		defer cancel()
		s.err = r.Call(ctx, protocol.MethodProposalSubmit, prop, &s.res)
	}()
	t.Cleanup(func() { <-s.done })
	return s
}

// wait is the proposal's result.
func (s *submission) wait(t *testing.T) protocol.ProposalResult {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(2 * waitTimeout):
		t.Fatal("proposal.submit never answered")
	}
	if s.err != nil {
		t.Fatalf("proposal.submit: %v", s.err)
	}
	return s.res
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// page is one browser tab.
type page struct {
	t   *testing.T
	ctx context.Context
}

// openPage opens url in a new tab. At the end of the test it saves a
// screenshot to the test's temporary directory and logs where.
func openPage(t *testing.T, url string) *page {
	t.Helper()
	needBrowser(t)
	tab, cancel := chromedp.NewContext(browser.ctx)
	t.Cleanup(cancel)
	// The first run opens the tab, which lives as long as that run's
	// context: the tab's own, never one with a timeout.
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	p := &page{t: t, ctx: tab}
	shots := t.TempDir()
	t.Cleanup(func() { p.screenshot(filepath.Join(shots, "dashboard.png")) })
	p.do(chromedp.Navigate(url))
	return p
}

func (p *page) screenshot(path string) {
	ctx, cancel := context.WithTimeout(p.ctx, waitTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err == nil {
		err = os.WriteFile(path, png, 0o644)
	}
	if err != nil {
		p.t.Errorf("screenshot: %v", err)
		return
	}
	p.t.Logf("screenshot: %s", path)
}

func (p *page) do(steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, waitTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		p.t.Fatalf("browser: %v", err)
	}
}

// until waits for a JavaScript condition to hold on the page.
func (p *page) until(what, js string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, waitTimeout)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0))); err != nil {
		p.t.Fatalf("waiting for %s (%s): %v", what, js, err)
	}
}

// eval evaluates a JavaScript expression on the page.
func eval[T any](p *page, js string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, waitTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// ready waits until the page has subscribed to everything.
func (p *page) ready() {
	p.t.Helper()
	p.until("the dashboard to be live", `document.body.dataset.ready === "true"`)
}

func (p *page) text(css string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, waitTimeout)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(css)))
	if err != nil {
		p.t.Fatalf("text of %s: %v", css, err)
	}
	return s
}

var errNoResult = errors.New("no result for the action")

func resultOf(res protocol.ProposalResult, id string) (protocol.ActionResult, error) {
	if r, ok := res.Result(id); ok {
		return r, nil
	}
	return protocol.ActionResult{}, fmt.Errorf("%w %s in %+v", errNoResult, id, res)
}

// errText is an action result's error, or "".
func errText(r protocol.ActionResult) string {
	if r.Error == nil {
		return ""
	}
	return *r.Error
}
