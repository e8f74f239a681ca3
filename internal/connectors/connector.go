package connectors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/protocol"
)

// Spec declares a connector: a Streamable HTTP server (URL) or a program run
// over stdio (Command). Headers and Env are secrets.
type Spec struct {
	Name     string
	URL      string
	Headers  map[string]string
	Command  string
	Args     []string
	Env      map[string]string
	FromFile bool     // declared in connectors.toml
	Enable   []string // connectors.toml's enable: enabled at every load
	// Classify is connectors.toml's classify: the operator's tier for a
	// tool, over what its annotations say.
	Classify map[string]policy.Tier
}

// discovered is one tool a server lists, as the daemon judged it.
type discovered struct {
	name        string
	description string
	schema      protocol.ToolSchema // canonical name, input schema, idempotent
	class       policy.Classification
	annotations json.RawMessage // the server's annotations, passed on to the daemon's MCP clients
	err         string          // why it cannot be enabled; "" when it can
}

// connector is one MCP server: a goroutine (run) keeps it connected,
// reconnecting with backoff, and publishes its enabled tools.
type connector struct {
	m      *Manager
	slug   string
	spec   Spec
	cancel context.CancelFunc
	done   chan struct{}
	poke   chan struct{}   // tools/list_changed: discover again
	web    *http.Transport // a Streamable HTTP connector's connections; nil for stdio

	mu        sync.Mutex
	sess      *mcp.ClientSession
	connected bool
	lastErr   string
	revision  string
	tools     []discovered // sorted by name
	enabled   map[string]bool
	tooLarge  bool // the connection ended on a message past mcp_max_result_bytes
}

func newConnector(m *Manager, slug string, spec Spec, enabled []string) *connector {
	c := &connector{m: m, slug: slug, spec: spec, done: make(chan struct{}), poke: make(chan struct{}, 1), enabled: map[string]bool{}}
	for _, t := range enabled {
		c.enabled[t] = true
	}
	for _, t := range spec.Enable {
		c.enabled[t] = true
	}
	if spec.URL != "" {
		c.web = http.DefaultTransport.(*http.Transport).Clone()
	}
	return c
}

// start runs the connector until stop. first, when not nil, receives the
// outcome of the first connection.
func (c *connector) start(first chan<- error) {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go c.run(ctx, first)
}

// stop ends the connection (and the child process) and waits for run.
func (c *connector) stop() {
	c.cancel()
	<-c.done
	if c.web != nil {
		c.web.CloseIdleConnections()
	}
	c.m.opts.Tools.Remove(c.slug)
}

// run connects, serves until the connection ends, and reconnects with
// backoff until ctx ends.
func (c *connector) run(ctx context.Context, first chan<- error) {
	defer close(c.done)
	wait := c.m.opts.BackoffMin
	for {
		err := c.connectAndServe(ctx, &first)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			wait = c.m.opts.BackoffMin
		}
		c.m.log.Warn("connector disconnected; reconnecting", zap.String("connector", c.slug), zap.Duration("in", wait), zap.String("error", c.status().LastError))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, c.m.opts.BackoffMax)
	}
}

// connectAndServe makes one connection and serves it until it ends. It
// returns nil when the connection was up, an error when it never was.
func (c *connector) connectAndServe(ctx context.Context, first *chan<- error) error {
	report := func(err error) {
		if *first != nil {
			*first <- err
			*first = nil
		}
	}
	cs, proc, err := c.connect(ctx)
	if err == nil {
		var tools []discovered
		if tools, err = c.discover(ctx, cs); err == nil {
			c.mu.Lock()
			c.tools = tools
			c.mu.Unlock()
			err = c.publish()
		}
		if err != nil {
			closeSession(cs, proc)
		}
	}
	if err != nil {
		c.setDown(err)
		report(err)
		return err
	}
	c.mu.Lock()
	c.sess, c.connected, c.lastErr, c.tooLarge = cs, true, "", false
	if r := cs.InitializeResult(); r != nil {
		c.revision = r.ProtocolVersion
	}
	revision, count := c.revision, len(c.tools)
	c.mu.Unlock()
	report(nil)
	c.m.log.Info("connector connected", zap.String("connector", c.slug), zap.String("protocol", revision), zap.Int("tools", count))

	ended := make(chan error, 1)
	go func() { ended <- cs.Wait() }()
	for {
		select {
		case <-ctx.Done():
			closeSession(cs, proc)
			<-ended
			c.setDown(errors.New("stopped"))
			return nil
		case err := <-ended:
			// The enabled tools stay published: a call fails at once,
			// naming the connector and why it is down.
			closeSession(cs, proc)
			c.setDown(c.lost(err, proc))
			return nil
		case <-c.poke:
			if err := c.rediscover(ctx, cs); err != nil {
				c.m.log.Warn("connector tools/list after tools/list_changed failed", zap.String("connector", c.slug), zap.Error(err))
			}
		}
	}
}

// rediscover lists the tools again and republishes the enabled ones.
func (c *connector) rediscover(ctx context.Context, cs *mcp.ClientSession) error {
	tools, err := c.discover(ctx, cs)
	if err != nil {
		c.mu.Lock()
		c.lastErr = err.Error()
		c.mu.Unlock()
		return err
	}
	c.mu.Lock()
	c.tools = tools
	c.mu.Unlock()
	return c.publish()
}

// lost says why a connection that was up ended.
func (c *connector) lost(err error, proc *process) error {
	c.mu.Lock()
	large := c.tooLarge
	c.mu.Unlock()
	switch {
	case large:
		return fmt.Errorf("the server sent a message of more than %d bytes (mcp_max_result_bytes); the connection was closed", c.m.opts.MaxResultBytes)
	case proc != nil && proc.describeExit() != "":
		return errors.New(proc.describeExit())
	case err != nil:
		return fmt.Errorf("the connection ended: %w", err)
	}
	return errors.New("the connection ended")
}

func (c *connector) setDown(err error) {
	c.mu.Lock()
	c.sess, c.connected, c.lastErr = nil, false, err.Error()
	c.mu.Unlock()
}

// connect starts the transport and initializes the MCP session on the
// newest protocol revision the SDK and the server share.
func (c *connector) connect(ctx context.Context) (*mcp.ClientSession, *process, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "car-server", Version: c.m.opts.Version}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
		KeepAlive:    c.m.opts.KeepAlive,
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case c.poke <- struct{}{}:
			default:
			}
		},
	})
	cctx, cancel := context.WithTimeout(ctx, c.m.opts.ConnectTimeout)
	defer cancel()
	over := func() {
		c.mu.Lock()
		c.tooLarge = true
		c.mu.Unlock()
	}
	if c.spec.URL != "" {
		t := &mcp.StreamableClientTransport{
			Endpoint:     c.spec.URL,
			HTTPClient:   &http.Client{Transport: &boundedTransport{base: c.web, headers: c.spec.Headers, max: c.m.opts.MaxResultBytes + envelopeBytes, over: over}},
			MaxEventSize: int(c.m.opts.MaxResultBytes + envelopeBytes),
			MaxRetries:   -1,
		}
		cs, err := client.Connect(cctx, t, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("connecting to %s: %s; is it a Streamable HTTP MCP server?", c.spec.URL, describeConnectError(cctx, err, c.m.opts.ConnectTimeout))
		}
		return cs, nil, nil
	}
	proc, err := startProcess(c.m.opts.Reaper, c.spec.Command, c.spec.Args, c.spec.Env)
	if err != nil {
		return nil, nil, err
	}
	t := &mcp.IOTransport{
		Reader:        readCloser{&lineLimit{r: proc.stdout, max: int(c.m.opts.MaxResultBytes + envelopeBytes), over: over}, proc.stdout},
		Writer:        proc.stdin,
		MaxLineLength: -1, // lineLimit bounds it, and says so
	}
	cs, err := client.Connect(cctx, t, nil)
	if err != nil {
		proc.stop()
		msg := describeConnectError(cctx, err, c.m.opts.ConnectTimeout)
		if exit := proc.describeExit(); exit != "" {
			msg = exit + " before answering initialize (" + msg + ")"
		}
		return nil, nil, fmt.Errorf("running %s: %s", c.spec.Command, msg)
	}
	return cs, proc, nil
}

// envelopeBytes is what a message may carry beyond its result: the
// JSON-RPC envelope.
const envelopeBytes = 64 << 10

func describeConnectError(ctx context.Context, err error, timeout time.Duration) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Sprintf("no answer to initialize within %s (mcp_connect_timeout)", timeout)
	}
	return err.Error()
}

func closeSession(cs *mcp.ClientSession, proc *process) {
	_ = cs.Close()
	if proc != nil {
		proc.stop()
	}
}

type readCloser struct {
	io.Reader
	io.Closer
}

// discover lists the server's tools, every page, refusing more than
// mcp_max_tools.
func (c *connector) discover(ctx context.Context, cs *mcp.ClientSession) ([]discovered, error) {
	lctx, cancel := context.WithTimeout(ctx, c.m.opts.ConnectTimeout)
	defer cancel()
	var out []discovered
	seen := map[string]bool{}
	for tool, err := range cs.Tools(lctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("tools/list failed: %w", err)
		}
		if len(out) >= c.m.opts.MaxTools {
			return nil, fmt.Errorf("the server lists more than %d tools (mcp_max_tools); none were taken: raise mcp_max_tools, or configure the server to offer fewer", c.m.opts.MaxTools)
		}
		if seen[tool.Name] {
			continue
		}
		seen[tool.Name] = true
		out = append(out, c.judge(tool))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// judge turns a listed tool into what the daemon offers: its canonical
// name, schema and classification, or why it cannot be enabled.
func (c *connector) judge(t *mcp.Tool) discovered {
	d := discovered{name: t.Name, description: t.Description}
	d.class, d.schema.Idempotent = classify(t.Annotations)
	if t.Annotations != nil {
		if raw, err := json.Marshal(t.Annotations); err == nil {
			d.annotations = raw
		}
	}
	if tier, ok := c.spec.Classify[t.Name]; ok {
		d.class = operatorClass(tier)
	}
	d.schema.Name = Canonical(c.slug, t.Name)
	d.schema.Description = t.Description
	if err := checkToolName(t.Name); err != nil {
		d.err = err.Error()
		d.schema.Name = ""
		return d
	}
	raw, err := jsonMarshal(t.InputSchema)
	if err != nil {
		d.err = "its input schema cannot be encoded: " + err.Error()
		return d
	}
	d.schema.Parameters = raw
	if err := c.m.opts.Tools.Check(d.schema); err != nil {
		d.err = err.Error()
	}
	return d
}

// publish hands the enabled tools that can run to the daemon's tools.
func (c *connector) publish() error {
	c.mu.Lock()
	var tools []engine.DaemonTool
	for _, d := range c.tools {
		if !c.enabled[d.name] || d.err != "" {
			continue
		}
		class := d.class
		tools = append(tools, engine.DaemonTool{Schema: d.schema, Source: "mcp", Class: &class, Annotations: d.annotations, Exec: &toolExec{c: c, tool: d.name}})
	}
	c.mu.Unlock()
	if err := c.m.opts.Tools.Set(c.slug, tools); err != nil {
		return fmt.Errorf("publishing the enabled tools: %w", err)
	}
	return nil
}

// session is the live session, or nil and why not.
func (c *connector) session() (*mcp.ClientSession, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sess, c.lastErr
}

// status is what connectors.list shows.
func (c *connector) status() protocol.ConnectorStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := protocol.ConnectorStatus{
		Slug: c.slug, Name: c.spec.Name, URL: c.spec.URL, Command: c.spec.Command,
		Connected: c.connected, ToolCount: len(c.tools), LastError: c.lastErr, FromFile: c.spec.FromFile,
	}
	if c.connected {
		s.Protocol = c.revision
	}
	for _, d := range c.tools {
		if c.enabled[d.name] && d.err == "" {
			s.EnabledCount++
		}
	}
	return s
}

// views is what connectors.tools shows.
func (c *connector) views() []protocol.ConnectorTool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]protocol.ConnectorTool, 0, len(c.tools))
	for _, d := range c.tools {
		out = append(out, protocol.ConnectorTool{
			Name: d.name, Canonical: Canonical(c.slug, d.name), Description: d.description,
			Enabled: c.enabled[d.name] && d.err == "", Tier: d.class.Tier.String(), Idempotent: d.schema.Idempotent, Error: d.err,
		})
	}
	return out
}

// enabledNames are the enabled tools, sorted, as persisted.
func (c *connector) enabledNames() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.enabled))
	for n := range c.enabled {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// setEnabled enables or disables tools: every name must be a tool the
// server lists (and, to enable, one that can run), or nothing changes. It
// returns the names whose state changed.
func (c *connector) setEnabled(tools []string, on bool) ([]string, error) {
	c.mu.Lock()
	byName := make(map[string]*discovered, len(c.tools))
	for i := range c.tools {
		byName[c.tools[i].name] = &c.tools[i]
	}
	var bad []string
	for _, t := range tools {
		d, ok := byName[t]
		switch {
		case !ok && on:
			bad = append(bad, fmt.Sprintf("'%s' is not a tool of this server", t))
		case !ok && !c.enabled[t]:
			bad = append(bad, fmt.Sprintf("'%s' is not a tool of this server", t))
		case ok && on && d.err != "":
			bad = append(bad, fmt.Sprintf("'%s' cannot be enabled: %s", t, d.err))
		}
	}
	if len(bad) > 0 {
		c.mu.Unlock()
		names := make([]string, 0, len(c.tools))
		for _, d := range c.tools {
			names = append(names, d.name)
		}
		hint := "connectors.tools {slug} lists them"
		if len(names) == 0 {
			hint = "the server lists no tools yet (connected: " + fmt.Sprint(c.connected) + "); connectors.refresh {slug} asks again"
		}
		return nil, fmt.Errorf("connector '%s': %s; nothing changed (%s)", c.slug, strings.Join(bad, "; "), hint)
	}
	var changed []string
	for _, t := range tools {
		if c.enabled[t] != on {
			changed = append(changed, t)
		}
		if on {
			c.enabled[t] = true
		} else {
			delete(c.enabled, t)
		}
	}
	c.mu.Unlock()
	return changed, c.publish()
}
