package engine

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/protocol"
)

// DaemonToolPrefix begins the name of every daemon-wide tool (an MCP
// connector's: mcp_<slug>_<tool>); a client cannot register a name that
// begins with it.
const DaemonToolPrefix = "mcp_"

// DaemonTool is one tool the daemon itself runs for every session, through
// an executor of its own instead of a callback on the connection: a tool an
// MCP connector discovered and a person enabled.
type DaemonTool struct {
	Schema protocol.ToolSchema // its name begins with DaemonToolPrefix
	Source string              // where it comes from ("mcp"), for tools.list and events
	Owner  string              // who provides it (the connector's slug), for tools.list, events and deny_connector
	// Class is the provider's classification of the tool (from its MCP
	// annotations); the classifier's signals from the parameters still
	// raise it. Nil: the classifier's, as for a client's tool.
	Class *policy.Classification
	// Annotations are the provider's MCP tool annotations as it sent them
	// (a JSON object; nil: none), passed on to MCP clients of the daemon.
	Annotations json.RawMessage
	Exec        ToolExecutor // runs it; never nil
}

// DaemonTools are the daemon-wide tools every session sees beside its own,
// grouped by owner. Safe for concurrent use.
type DaemonTools struct {
	mu      sync.RWMutex
	byName  map[string]*Tool
	byOwner map[string][]string // owner → its tools' names
	limits  SchemaLimits
	hint    func(name string) string // completes "unknown tool" for a name under the prefix; nil: none
}

// NewDaemonTools returns an empty set whose schemas are held to limits
// (zero fields: DefaultSchemaLimits).
func NewDaemonTools(limits SchemaLimits) *DaemonTools {
	return &DaemonTools{byName: map[string]*Tool{}, byOwner: map[string][]string{}, limits: limits.withDefaults()}
}

// Set replaces every tool of owner with tools, all of them or none: a
// schema past the bounds, a name outside the prefix or one another owner
// holds refuses the whole set, naming the tool.
func (d *DaemonTools) Set(owner string, tools []DaemonTool) error {
	compiled := make([]*Tool, 0, len(tools))
	seen := make(map[string]bool, len(tools))
	for _, dt := range tools {
		if !strings.HasPrefix(dt.Schema.Name, DaemonToolPrefix) {
			return fmt.Errorf("daemon tool '%s' does not begin with %q", dt.Schema.Name, DaemonToolPrefix)
		}
		if dt.Exec == nil {
			return fmt.Errorf("daemon tool '%s' has no executor", dt.Schema.Name)
		}
		if seen[dt.Schema.Name] {
			return fmt.Errorf("daemon tool '%s' is listed twice", dt.Schema.Name)
		}
		seen[dt.Schema.Name] = true
		t, err := compileTool(dt.Schema, d.limits)
		if err != nil {
			return err
		}
		t.exec, t.source, t.owner, t.class, t.annotations = dt.Exec, dt.Source, owner, dt.Class, dt.Annotations
		compiled = append(compiled, t)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, t := range compiled {
		if held, ok := d.byName[t.Schema.Name]; ok && held.owner != owner {
			return fmt.Errorf("daemon tool '%s' is already provided by '%s'", t.Schema.Name, held.owner)
		}
	}
	for _, name := range d.byOwner[owner] {
		delete(d.byName, name)
	}
	names := make([]string, 0, len(compiled))
	for _, t := range compiled {
		d.byName[t.Schema.Name] = t
		names = append(names, t.Schema.Name)
	}
	if len(names) == 0 {
		delete(d.byOwner, owner)
	} else {
		d.byOwner[owner] = names
	}
	return nil
}

// Check says whether one schema would be taken by Set: its name under the
// prefix, its schemas within the bounds. A provider checks each tool apart,
// so one bad tool does not refuse its siblings.
func (d *DaemonTools) Check(s protocol.ToolSchema) error {
	if !strings.HasPrefix(s.Name, DaemonToolPrefix) {
		return fmt.Errorf("daemon tool '%s' does not begin with %q", s.Name, DaemonToolPrefix)
	}
	_, err := compileTool(s, d.limits)
	return err
}

// SetMissingHint sets what completes the "unknown tool" message for a name
// under the prefix that no provider holds (a connector's disabled tool says
// how to enable it). Call it before the set is shared.
func (d *DaemonTools) SetMissingHint(hint func(name string) string) { d.hint = hint }

// missing is the hint for an unknown name under the prefix, or "".
func (d *DaemonTools) missing(name string) string {
	if d == nil || d.hint == nil {
		return ""
	}
	return d.hint(name)
}

// Remove drops every tool of owner.
func (d *DaemonTools) Remove(owner string) { _ = d.Set(owner, nil) }

// Lookup returns the named tool.
func (d *DaemonTools) Lookup(name string) (*Tool, bool) {
	if d == nil {
		return nil, false
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	t, ok := d.byName[name]
	return t, ok
}

// List returns every schema, sorted by name.
func (d *DaemonTools) List() []protocol.ToolSchema {
	if d == nil {
		return nil
	}
	d.mu.RLock()
	out := make([]protocol.ToolSchema, 0, len(d.byName))
	for _, t := range d.byName {
		out = append(out, t.listed())
	}
	d.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// listed is the schema tools.list shows: a daemon tool says where it comes
// from.
func (t *Tool) listed() protocol.ToolSchema {
	s := t.Schema
	s.Source, s.Connector = t.source, t.owner
	return s
}

// Source is where a daemon tool comes from ("mcp"); "" for a client's tool.
func (t *Tool) Source() string { return t.source }

// Annotations are a daemon tool's MCP annotations as its provider sent
// them; nil for a client's tool or a tool without them.
func (t *Tool) Annotations() json.RawMessage { return t.annotations }

// Owner is who provides a daemon tool (a connector's slug); "" for a
// client's tool.
func (t *Tool) Owner() string { return t.owner }

// Classify is the classification of a: a daemon tool's call starts from its
// provider's classification, raised by what the classifier finds in the
// parameters; everything else is the classifier's.
func (rt *Runtime) Classify(a *protocol.Action) policy.Classification {
	if a.Type != protocol.ActionToolCall {
		return policy.Classify(a)
	}
	t, ok := rt.opts.DaemonTools.Lookup(a.Tool)
	if !ok || t.class == nil {
		return policy.Classify(a)
	}
	return policy.ClassifyFrom(a, *t.class)
}
