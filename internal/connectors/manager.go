package connectors

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/protocol"
)

// Defaults of Options' zero fields; config shows and applies them.
const (
	DefaultMaxConnectors  = 64
	DefaultMaxTools       = 1000
	DefaultMaxResultBytes = 16 << 20
	DefaultConnectTimeout = 30 * time.Second
	DefaultKeepAlive      = 30 * time.Second
	backoffMin            = time.Second
	backoffMax            = time.Minute
)

// Bounds of a connector's declaration, whoever sends it.
const (
	maxNameBytes   = 128
	maxArgs        = 256
	maxSecretPairs = 64 // headers, or env variables
	maxValueBytes  = 16 << 10
)

// Options configure a Manager.
type Options struct {
	Home           string              // $CAR_HOME: connectors.toml, connectors.json, connectors.secrets.json
	Tools          *engine.DaemonTools // where enabled tools are published; required
	MaxConnectors  int                 // connectors at once (DefaultMaxConnectors)
	MaxTools       int                 // tools one server may list (DefaultMaxTools)
	MaxResultBytes int64               // one tools/call result, and one message (DefaultMaxResultBytes)
	ConnectTimeout time.Duration       // initialize and tools/list (DefaultConnectTimeout)
	KeepAlive      time.Duration       // ping interval that finds a dead server (DefaultKeepAlive); negative: none
	BackoffMin     time.Duration       // first reconnect wait (1s)
	BackoffMax     time.Duration       // longest reconnect wait (1m)
	Version        string              // the daemon's, sent as clientInfo
	// Reaper is the argv that runs a stdio server under a process that
	// kills the server's whole process group when the daemon dies (the
	// daemon's own binary with ReaperCommand); nil runs servers directly.
	Reaper []string
	Logger *zap.Logger
}

func (o Options) withDefaults() Options {
	if o.MaxConnectors <= 0 {
		o.MaxConnectors = DefaultMaxConnectors
	}
	if o.MaxTools <= 0 {
		o.MaxTools = DefaultMaxTools
	}
	if o.MaxResultBytes <= 0 {
		o.MaxResultBytes = DefaultMaxResultBytes
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.KeepAlive == 0 {
		o.KeepAlive = DefaultKeepAlive
	}
	if o.KeepAlive < 0 {
		o.KeepAlive = 0
	}
	if o.BackoffMin <= 0 {
		o.BackoffMin = backoffMin
	}
	if o.BackoffMax < o.BackoffMin {
		o.BackoffMax = max(backoffMax, o.BackoffMin)
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return o
}

// Manager holds the daemon's connectors. Safe for concurrent use.
type Manager struct {
	opts Options
	log  *zap.Logger

	mu     sync.Mutex // guards conns, closed; never held across I/O but the files' writes
	conns  map[string]*connector
	closed bool
}

// New returns a Manager with no connectors; Start loads them.
func New(opts Options) *Manager {
	opts = opts.withDefaults()
	m := &Manager{opts: opts, log: opts.Logger, conns: map[string]*connector{}}
	opts.Tools.SetMissingHint(m.hint)
	return m
}

// FilePath is the operator's connectors file under home.
func FilePath(home string) string { return filepath.Join(home, "connectors.toml") }

// Start loads the connectors the wire added (connectors.json) and the
// operator's file, and starts them all; each connects in the background. A
// malformed connectors.toml stops the start, naming the file and line.
func (m *Manager) Start() error {
	saved, err := m.load()
	if err != nil {
		return err
	}
	declared, err := LoadFile(FilePath(m.opts.Home))
	if err != nil {
		return err
	}
	enabledBySlug := map[string][]string{}
	for _, s := range saved {
		enabledBySlug[s.slug] = s.enabled
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, spec := range declared {
		slug := Slug(spec.Name)
		m.startLocked(slug, spec, enabledBySlug[slug])
	}
	for _, s := range saved {
		if s.spec.FromFile {
			continue // the file says whether it still exists
		}
		clash := ""
		for other := range m.conns {
			if other == s.slug || ambiguous(other, s.slug) {
				clash = other
			}
		}
		if clash != "" {
			m.log.Warn("a connector added over the wire clashes with one in connectors.toml (same slug, or names that would be ambiguous); the file's is kept", zap.String("connector", s.slug), zap.String("file_connector", clash))
			continue
		}
		m.startLocked(s.slug, s.spec, s.enabled)
	}
	return nil
}

func (m *Manager) startLocked(slug string, spec Spec, enabled []string) *connector {
	c := newConnector(m, slug, spec, enabled)
	m.conns[slug] = c
	c.start(nil)
	return c
}

// Reload re-reads connectors.toml: a connector it no longer declares is
// stopped, a new one started, a changed one restarted; the enabled tools
// are kept. A malformed file changes nothing.
func (m *Manager) Reload() error {
	declared, err := LoadFile(FilePath(m.opts.Home))
	if err != nil {
		return err
	}
	want := map[string]Spec{}
	for _, s := range declared {
		want[Slug(s.Name)] = s
	}
	var stop []*connector
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	for slug, c := range m.conns {
		spec, ok := want[slug]
		switch {
		case !c.spec.FromFile && ok:
			m.log.Warn("connectors.toml declares a connector with the slug of one added over the wire; the wire's is kept until removed", zap.String("connector", slug))
			delete(want, slug)
		case !c.spec.FromFile:
		case !ok:
			delete(m.conns, slug)
			stop = append(stop, c)
		case !sameSpec(c.spec, spec):
			delete(m.conns, slug)
			stop = append(stop, c)
		default:
			delete(want, slug)
		}
	}
	m.mu.Unlock()
	enabled := map[string][]string{}
	for _, c := range stop {
		enabled[c.slug] = c.enabledNames()
		c.stop()
	}
	m.mu.Lock()
	for slug, spec := range want {
		if _, ok := m.conns[slug]; ok || m.closed {
			continue
		}
		clash := ""
		for other, c := range m.conns {
			if !c.spec.FromFile && ambiguous(slug, other) {
				clash = other
			}
		}
		if clash != "" {
			m.log.Warn("connectors.toml declares a connector whose tool names would be ambiguous with one added over the wire; it is not started until that one is removed", zap.String("connector", slug), zap.String("wire_connector", clash))
			continue
		}
		m.startLocked(slug, spec, enabled[slug])
	}
	m.mu.Unlock()
	return m.save()
}

func sameSpec(a, b Spec) bool {
	return a.Name == b.Name && a.URL == b.URL && a.Command == b.Command &&
		strings.Join(a.Args, "\x00") == strings.Join(b.Args, "\x00") &&
		sameMap(a.Headers, b.Headers) && sameMap(a.Env, b.Env) &&
		strings.Join(a.Enable, "\x00") == strings.Join(b.Enable, "\x00") &&
		maps.Equal(a.Classify, b.Classify)
}

func sameMap(a, b map[string]string) bool { return maps.Equal(a, b) }

// Close stops every connector and its child process.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	conns := make([]*connector, 0, len(m.conns))
	for _, c := range m.conns {
		conns = append(conns, c)
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() { defer wg.Done(); c.stop() }()
	}
	wg.Wait()
}

// Add adds a Streamable HTTP server. It answers once the first connection
// is made; a server that cannot be reached or is not an MCP server is
// refused, and nothing is kept.
func (m *Manager) Add(ctx context.Context, p protocol.ConnectorsAddParams) (protocol.ConnectorStatus, error) {
	u, err := url.Parse(p.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return protocol.ConnectorStatus{}, fmt.Errorf("url %q is not an http:// or https:// URL of a Streamable HTTP MCP server", p.URL)
	}
	if err := checkSecrets("headers", p.Headers); err != nil {
		return protocol.ConnectorStatus{}, err
	}
	return m.add(ctx, Spec{Name: p.Name, URL: p.URL, Headers: p.Headers})
}

// AddStdio adds a server the daemon runs as a child process.
func (m *Manager) AddStdio(ctx context.Context, p protocol.ConnectorsAddStdioParams) (protocol.ConnectorStatus, error) {
	if strings.TrimSpace(p.Command) == "" {
		return protocol.ConnectorStatus{}, errors.New("command is required: the program that runs the MCP server")
	}
	if len(p.Command) > maxValueBytes {
		return protocol.ConnectorStatus{}, fmt.Errorf("command is %d bytes, over %d", len(p.Command), maxValueBytes)
	}
	if len(p.Args) > maxArgs {
		return protocol.ConnectorStatus{}, fmt.Errorf("%d args, over %d", len(p.Args), maxArgs)
	}
	for i, a := range p.Args {
		if len(a) > maxValueBytes {
			return protocol.ConnectorStatus{}, fmt.Errorf("args[%d] is %d bytes, over %d", i, len(a), maxValueBytes)
		}
	}
	if err := checkSecrets("env", p.Env); err != nil {
		return protocol.ConnectorStatus{}, err
	}
	return m.add(ctx, Spec{Name: p.Name, Command: p.Command, Args: p.Args, Env: p.Env})
}

func checkSecrets(field string, kv map[string]string) error {
	if len(kv) > maxSecretPairs {
		return fmt.Errorf("%s has %d entries, over %d", field, len(kv), maxSecretPairs)
	}
	for k, v := range kv {
		if k == "" || len(k)+len(v) > maxValueBytes {
			return fmt.Errorf("%s: an entry has an empty name or is over %d bytes", field, maxValueBytes)
		}
		if field == "env" && strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("env: a variable name holds '=' or NUL")
		}
	}
	return nil
}

// checkName refuses a name without a letter or digit, or too long.
func checkName(name string) (string, error) {
	if len(name) > maxNameBytes {
		return "", fmt.Errorf("name is %d bytes, over %d", len(name), maxNameBytes)
	}
	slug := Slug(name)
	if strings.Trim(slug, "_") == "" {
		return "", fmt.Errorf("name %q needs a letter or digit: the slug (the name lower-cased, other characters turned into '_') names the connector's tools", name)
	}
	return slug, nil
}

func (m *Manager) add(ctx context.Context, spec Spec) (protocol.ConnectorStatus, error) {
	slug, err := checkName(spec.Name)
	if err != nil {
		return protocol.ConnectorStatus{}, err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return protocol.ConnectorStatus{}, errors.New("the daemon is shutting down")
	}
	if _, ok := m.conns[slug]; ok {
		m.mu.Unlock()
		return protocol.ConnectorStatus{}, fmt.Errorf("a connector with slug '%s' exists; remove it (connectors.remove {slug}) or pick another name", slug)
	}
	for other := range m.conns {
		if ambiguous(slug, other) {
			m.mu.Unlock()
			return protocol.ConnectorStatus{}, fmt.Errorf("slug '%s' and connector '%s' would make tool names ambiguous (mcp_%s_…); pick a name whose slug neither begins with the other's followed by '_'", slug, other, slug)
		}
	}
	if len(m.conns) >= m.opts.MaxConnectors {
		m.mu.Unlock()
		return protocol.ConnectorStatus{}, fmt.Errorf("%d connectors exist, the limit (mcp_max_connectors); remove one first", len(m.conns))
	}
	c := newConnector(m, slug, spec, nil)
	m.conns[slug] = c // holds the slug while it connects
	m.mu.Unlock()
	first := make(chan error, 1)
	c.start(first)
	select {
	case err = <-first:
	case <-ctx.Done():
		err = fmt.Errorf("gave up waiting for the first connection: %w", context.Cause(ctx))
	}
	if err != nil {
		m.drop(c)
		return protocol.ConnectorStatus{}, fmt.Errorf("connector '%s' was not added: %w", slug, err)
	}
	if err := m.save(); err != nil {
		m.drop(c)
		return protocol.ConnectorStatus{}, fmt.Errorf("connector '%s' was not added: %w", slug, err)
	}
	m.log.Info("connector added", zap.String("connector", slug), zap.String("url", spec.URL), zap.String("command", spec.Command))
	return c.status(), nil
}

func (m *Manager) drop(c *connector) {
	m.mu.Lock()
	if m.conns[c.slug] == c {
		delete(m.conns, c.slug)
	}
	m.mu.Unlock()
	c.stop()
}

// get is the named connector, or an error listing the ones there are.
func (m *Manager) get(slug string) (*connector, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.conns[slug]; ok {
		return c, nil
	}
	slugs := make([]string, 0, len(m.conns))
	for s := range m.conns {
		slugs = append(slugs, s)
	}
	sort.Strings(slugs)
	if len(slugs) == 0 {
		return nil, fmt.Errorf("no connector '%s'; there are none (connectors.add or connectors.add_stdio adds one)", slug)
	}
	return nil, fmt.Errorf("no connector '%s'; connectors: %s", slug, strings.Join(slugs, ", "))
}

// List is every connector, sorted by slug.
func (m *Manager) List() protocol.ConnectorsListResult {
	m.mu.Lock()
	conns := make([]*connector, 0, len(m.conns))
	for _, c := range m.conns {
		conns = append(conns, c)
	}
	m.mu.Unlock()
	out := protocol.ConnectorsListResult{Connectors: make([]protocol.ConnectorStatus, 0, len(conns))}
	for _, c := range conns {
		out.Connectors = append(out.Connectors, c.status())
	}
	sort.Slice(out.Connectors, func(i, j int) bool { return out.Connectors[i].Slug < out.Connectors[j].Slug })
	return out
}

// Tools are a connector's tools, enabled or not.
func (m *Manager) Tools(slug string) ([]protocol.ConnectorTool, error) {
	c, err := m.get(slug)
	if err != nil {
		return nil, err
	}
	return c.views(), nil
}

// Enable enables tools of a connector, all or none, and persists the choice.
func (m *Manager) Enable(slug string, tools []string) (protocol.ConnectorEnableResult, error) {
	c, err := m.get(slug)
	if err != nil {
		return protocol.ConnectorEnableResult{}, err
	}
	if len(tools) == 0 {
		return protocol.ConnectorEnableResult{}, errors.New("tools is required: the MCP names of the tools to enable (connectors.tools {slug} lists them)")
	}
	if _, err := c.setEnabled(tools, true); err != nil {
		return protocol.ConnectorEnableResult{}, err
	}
	if err := m.save(); err != nil {
		return protocol.ConnectorEnableResult{}, err
	}
	return protocol.ConnectorEnableResult{Enabled: c.enabledNames()}, nil
}

// Disable disables tools of a connector and persists the choice.
func (m *Manager) Disable(slug string, tools []string) (protocol.ConnectorDisableResult, error) {
	c, err := m.get(slug)
	if err != nil {
		return protocol.ConnectorDisableResult{}, err
	}
	if len(tools) == 0 {
		return protocol.ConnectorDisableResult{}, errors.New("tools is required: the MCP names of the tools to disable")
	}
	changed, err := c.setEnabled(tools, false)
	if err != nil {
		return protocol.ConnectorDisableResult{}, err
	}
	if err := m.save(); err != nil {
		return protocol.ConnectorDisableResult{}, err
	}
	if changed == nil {
		changed = []string{}
	}
	return protocol.ConnectorDisableResult{Disabled: changed}, nil
}

// Refresh lists the server's tools again (keeping the enabled ones
// enabled) and answers the tool views.
func (m *Manager) Refresh(ctx context.Context, slug string) ([]protocol.ConnectorTool, error) {
	c, err := m.get(slug)
	if err != nil {
		return nil, err
	}
	cs, why := c.session()
	if cs == nil {
		return nil, fmt.Errorf("connector '%s' is disconnected (%s); it reconnects with backoff and lists its tools then", slug, why)
	}
	if err := c.rediscover(ctx, cs); err != nil {
		return nil, fmt.Errorf("connector '%s': %w", slug, err)
	}
	return c.views(), nil
}

// Remove stops a connector added over the wire, ends its process and
// forgets it. One from connectors.toml is refused.
func (m *Manager) Remove(slug string) (protocol.ConnectorRemoveResult, error) {
	c, err := m.get(slug)
	if err != nil {
		return protocol.ConnectorRemoveResult{}, err
	}
	if c.spec.FromFile {
		return protocol.ConnectorRemoveResult{}, fmt.Errorf("connector '%s' is declared in %s; remove it there and send the daemon SIGHUP", slug, FilePath(m.opts.Home))
	}
	m.drop(c)
	if err := m.save(); err != nil {
		return protocol.ConnectorRemoveResult{}, err
	}
	m.log.Info("connector removed", zap.String("connector", slug))
	return protocol.ConnectorRemoveResult{Removed: slug}, nil
}

// hint completes the "unknown tool" message for a name under the daemon
// tools' prefix: a disabled tool says how to enable it.
func (m *Manager) hint(name string) string {
	m.mu.Lock()
	conns := make([]*connector, 0, len(m.conns))
	for _, c := range m.conns {
		conns = append(conns, c)
	}
	m.mu.Unlock()
	for _, c := range conns {
		prefix := Canonical(c.slug, "")
		tool, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		for _, v := range c.views() {
			if v.Name != tool {
				continue
			}
			if v.Error != "" {
				return fmt.Sprintf("connector '%s' lists '%s', but it cannot be enabled: %s", c.slug, tool, v.Error)
			}
			return fmt.Sprintf("connector '%s' has the tool '%s', but it is disabled: enable it with connectors.enable_tools {\"slug\": %q, \"tools\": [%q]}", c.slug, tool, c.slug, tool)
		}
		if s := c.status(); !s.Connected {
			return fmt.Sprintf("connector '%s' is disconnected (%s), so its tools are not known yet", c.slug, s.LastError)
		}
		return fmt.Sprintf("connector '%s' lists no tool '%s' (connectors.tools {\"slug\": %q} lists them)", c.slug, tool, c.slug)
	}
	return ""
}
