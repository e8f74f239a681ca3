package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/time/rate"

	"github.com/parslee-ai/car-server/internal/idempotency"
	"github.com/parslee-ai/car-server/internal/messaging"
	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/protocol"
)

// Tool is a registered tool: its schema as the client sent it and the
// parameter validator compiled once at registration.
type Tool struct {
	Schema     protocol.ToolSchema
	validator  *jsonschema.Schema // parameters
	returns    *jsonschema.Schema // nil without returns
	evalBudget uint64             // subschema checks one validation may make (SchemaLimits.MaxEvaluations)
	limiter    *rate.Limiter      // nil without rate_limit
	tokenEvery time.Duration      // how long the limiter takes to grant one call; 0 without rate_limit
	cache      *resultCache       // nil without cache_ttl_secs
	builtin    bool               // run by the daemon (messaging.send), not by a callback
	nameValue  any                // Schema.Name boxed once, for event data
	spanName   string             // SpanToolCall + Schema.Name, made once, for its calls' spans
	// digest is the tool's identity beyond its name in idempotency keys
	// (idempotency.SchemaDigest); "" for the built-in, whose schema is the
	// daemon's own.
	digest string
	// A daemon tool (DaemonTools) is run by exec, not by a callback; source
	// and owner say where it comes from, class is its provider's
	// classification (nil: the classifier's).
	exec        ToolExecutor
	source      string
	owner       string
	class       *policy.Classification
	annotations json.RawMessage // its provider's MCP annotations; nil: none
}

// ValidateParams checks params (decoded JSON) against the tool's parameter
// schema and returns an error that names what is wrong (a *SchemaError).
// Parameters that would take more than the tool's budget of subschema
// checks are refused before the validator runs, as is everything once ctx
// ends.
func (t *Tool) ValidateParams(ctx context.Context, params any) error {
	if t.validator == nil {
		return nil
	}
	if err := t.withinBudget(ctx, t.validator, "parameters", params); err != nil {
		return err
	}
	if err := t.validator.Validate(params); err != nil {
		return newSchemaError(fmt.Sprintf("parameters do not match the schema of tool '%s': ", t.Schema.Name), err)
	}
	return nil
}

// ValidateOutput checks a tool's output against its returns schema, when it
// has one, and names the path that does not fit (a *SchemaError).
func (t *Tool) ValidateOutput(ctx context.Context, output any) error {
	if t.returns == nil {
		return nil
	}
	if err := t.withinBudget(ctx, t.returns, "output", output); err != nil {
		return err
	}
	if err := t.returns.Validate(output); err != nil {
		return newSchemaError(fmt.Sprintf("tool '%s' returned output that does not match its returns schema: ", t.Schema.Name), err)
	}
	return nil
}

// withinBudget refuses a value whose validation against s would pass the
// tool's budget of subschema checks (what names the value: parameters or
// output).
func (t *Tool) withinBudget(ctx context.Context, s *jsonschema.Schema, what string, v any) error {
	err := validationCost(ctx, s, v, t.evalBudget)
	if errors.Is(err, errOverBudget) {
		return fmt.Errorf("checking these %s against the schema of tool '%s' would take more than %d subschema checks and the members and items they loop over (max_schema_evaluations); nothing was validated: send smaller %s, or simplify the schema", what, t.Schema.Name, t.evalBudget, what)
	}
	if err != nil {
		return fmt.Errorf("checking the %s of tool '%s' stopped: %w", what, t.Schema.Name, err)
	}
	return nil
}

// SchemaError is a value that does not fit a tool's schema. Error is the
// validator's whole message, which quotes the value: it goes to the caller,
// whose value it is. Redacted names only the paths and keywords that failed
// ("/ssn: pattern"): it is what the shared event log records.
type SchemaError struct {
	prefix string // what was checked, ending in ": "
	err    error  // the validator's error
}

func newSchemaError(prefix string, err error) *SchemaError {
	return &SchemaError{prefix: prefix, err: err}
}

func (e *SchemaError) Error() string { return e.prefix + schemaErrorText(e.err) }

func (e *SchemaError) Unwrap() error { return e.err }

// Redacted is the message without the value: each failing location as a
// JSON pointer with the keyword that failed there, sorted (see LoggedError).
func (e *SchemaError) Redacted() string {
	var ve *jsonschema.ValidationError
	if !errors.As(e.err, &ve) {
		return e.prefix + "the value does not fit"
	}
	var parts []string
	seen := map[string]bool{}
	var walk func(v *jsonschema.ValidationError)
	walk = func(v *jsonschema.ValidationError) {
		if len(v.Causes) > 0 {
			for _, c := range v.Causes {
				walk(c)
			}
			return
		}
		part := jsonPointer(v.InstanceLocation) + ": " + keywordOf(v.ErrorKind)
		if !seen[part] {
			seen[part] = true
			parts = append(parts, part)
		}
	}
	walk(ve)
	sort.Strings(parts)
	return e.prefix + strings.Join(parts, "; ")
}

// keywordOf is the schema keyword an error kind reports ("pattern",
// "required"), or "schema" when it names none.
func keywordOf(k jsonschema.ErrorKind) string {
	if k == nil {
		return "schema"
	}
	if path := k.KeywordPath(); len(path) > 0 {
		return path[len(path)-1]
	}
	return "schema"
}

// jsonPointer writes an instance location as an RFC 6901 pointer.
func jsonPointer(loc []string) string {
	if len(loc) == 0 {
		return "/"
	}
	var b strings.Builder
	for _, seg := range loc {
		b.WriteByte('/')
		b.WriteString(pointerEscaper.Replace(seg))
	}
	return b.String()
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// schemaErrorText flattens a jsonschema error onto one line.
func schemaErrorText(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// ToolRegistry holds the tools of one connection. It is safe for concurrent
// use.
type ToolRegistry struct {
	mu     sync.RWMutex
	tools  map[string]*Tool // the client's; nil until it registers one
	max    int              // client-registered tools held at once; 0 is unbounded
	limits SchemaLimits     // what a registered schema may cost
	daemon *DaemonTools     // the daemon-wide tools every session sees; nil: none
	lent   map[string]*Tool // tools the daemon lends this session for a while (Lend)
}

// builtinMessaging is the built-in messaging.send every registry holds: one
// for all of them, never changed.
var builtinMessaging = &Tool{Schema: messaging.Schema(), builtin: true, nameValue: messaging.ToolName, spanName: SpanToolCall + messaging.ToolName}

// NewToolRegistry returns a registry holding the built-in messaging.send,
// and at most max tools a client registers (0: unbounded), each schema
// within limits (zero fields: DefaultSchemaLimits). The built-in's
// parameters are checked by the verb's own parser, whose errors name the
// field and the accepted shape, so its schema is advertised, not compiled.
func NewToolRegistry(max int, limits SchemaLimits) *ToolRegistry {
	return &ToolRegistry{max: max, limits: limits.withDefaults()}
}

// Register compiles every schema first and registers all of the tools or none
// of them, replacing tools of the same name. It returns how many it registered.
func (r *ToolRegistry) Register(schemas []protocol.ToolSchema) (int, error) {
	compiled := make([]*Tool, 0, len(schemas))
	for i, s := range schemas {
		if s.Name == messaging.ToolName {
			return 0, fmt.Errorf("tool %d: '%s' is built in (the daemon governs and dedups it, the client delivers it through %s); it cannot be registered", i, s.Name, messaging.DeliveryTool)
		}
		if s.Name == protocol.ToolSpawnSubtask {
			return 0, fmt.Errorf("tool %d: '%s' is the daemon's: multi.subtask lends it to the main agent's proposals while it runs; register your tool under another name", i, s.Name)
		}
		if strings.HasPrefix(s.Name, DaemonToolPrefix) {
			return 0, fmt.Errorf("tool %d: '%s' begins with %q, which names the tools of the daemon's MCP connectors; register it under another name", i, s.Name, DaemonToolPrefix)
		}
		t, err := compileTool(s, r.limits)
		if err != nil {
			return 0, fmt.Errorf("tool %d: %w", i, err)
		}
		compiled = append(compiled, t)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.max > 0 {
		held := len(r.tools)
		added := map[string]bool{}
		for _, t := range compiled {
			if _, ok := r.tools[t.Schema.Name]; !ok {
				added[t.Schema.Name] = true
			}
		}
		if held+len(added) > r.max {
			return 0, fmt.Errorf("the connection would hold %d tools, over the limit of %d per connection (max_tools); nothing was registered: unregister tools, or raise max_tools", held+len(added), r.max)
		}
	}
	if r.tools == nil {
		r.tools = make(map[string]*Tool, len(compiled))
	}
	for _, t := range compiled {
		r.tools[t.Schema.Name] = t
	}
	return len(compiled), nil
}

// Unregister removes the named tool and returns 1, or 0 when it was absent.
// Built-in tools cannot be removed.
func (r *ToolRegistry) Unregister(name string) (int, error) {
	if name == messaging.ToolName {
		return 0, fmt.Errorf("'%s' is built in and cannot be unregistered; deny it with a policy instead", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.tools[name]; !ok {
		return 0, nil
	}
	delete(r.tools, name)
	return 1, nil
}

// Lookup returns the named tool.
func (r *ToolRegistry) Lookup(name string) (*Tool, bool) {
	if name == messaging.ToolName {
		return builtinMessaging, true
	}
	if strings.HasPrefix(name, DaemonToolPrefix) {
		return r.daemon.Lookup(name)
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if t, ok := r.lent[name]; ok {
		return t, true
	}
	t, ok := r.tools[name]
	return t, ok
}

// Lend gives this session a tool the daemon runs (exec), named by a name a
// client cannot register, until release is called; source says where it
// comes from in tools.list and events. A name already lent is refused:
// one lender at a time.
func (r *ToolRegistry) Lend(s protocol.ToolSchema, source string, exec ToolExecutor) (release func(), err error) {
	t, err := compileTool(s, r.limits)
	if err != nil {
		return nil, err
	}
	t.exec, t.source = exec, source
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.lent[s.Name]; ok {
		return nil, fmt.Errorf("'%s' is lent to a %s already running on this connection: run one at a time", s.Name, source)
	}
	if r.lent == nil {
		r.lent = map[string]*Tool{}
	}
	r.lent[s.Name] = t
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.lent[s.Name] == t {
			delete(r.lent, s.Name)
		}
	}, nil
}

// List returns every schema, sorted by name so two listings can be diffed.
func (r *ToolRegistry) List() []protocol.ToolSchema {
	r.mu.RLock()
	out := make([]protocol.ToolSchema, 0, 1+len(r.tools))
	out = append(out, builtinMessaging.Schema)
	for _, t := range r.tools {
		out = append(out, t.Schema)
	}
	for _, t := range r.lent {
		out = append(out, t.listed())
	}
	r.mu.RUnlock()
	out = append(out, r.daemon.List()...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// maxNamesInMessage bounds the names an error message lists: the tools of
// an "unknown tool", the actions the permission gate blocks.
const maxNamesInMessage = 20

// UnknownTool is the message for a call to a tool the registry lacks: the
// first registered names, sorted, and how many there are.
func (r *ToolRegistry) UnknownTool(name string) string {
	if strings.HasPrefix(name, DaemonToolPrefix) {
		if hint := r.daemon.missing(name); hint != "" {
			return fmt.Sprintf("unknown tool '%s': %s", name, hint)
		}
	}
	names := r.Names()
	switch {
	case len(names) == 0:
		return fmt.Sprintf("unknown tool '%s'; this connection has registered no tools (tools.register)", name)
	case len(names) > maxNamesInMessage:
		return fmt.Sprintf("unknown tool '%s'; %d registered (tools.list has them all), the first %d: %s", name, len(names), maxNamesInMessage, strings.Join(names[:maxNamesInMessage], ", "))
	}
	return fmt.Sprintf("unknown tool '%s'; registered: %s", name, strings.Join(names, ", "))
}

// Names returns the registered tool names, sorted, for error messages.
func (r *ToolRegistry) Names() []string {
	list := r.List()
	names := make([]string, len(list))
	for i, s := range list {
		names[i] = s.Name
	}
	return names
}

// maxTokenEvery caps a rate limit's interval per call at a century: the
// token bucket's arithmetic overflows near the longest Duration, and a
// century is as good as forever for a limit.
const maxTokenEvery = 100 * 365 * 24 * time.Hour

// isAbsent reports whether a schema field was left out (or null).
func isAbsent(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

// compileSchema compiles one of a tool's JSON Schemas (field names which).
// Only inline references resolve: a client's schema must not make the daemon
// read its files ($ref: file:///…) or fetch anything. A schema past limits
// is refused, naming the bound, before or right after it is compiled.
func compileSchema(tool, field string, raw json.RawMessage, l SchemaLimits) (*jsonschema.Schema, error) {
	if len(raw) > l.MaxBytes {
		return nil, fmt.Errorf("tool '%s': %s is %d bytes, over max_schema_bytes (%d): shrink the schema, or raise max_schema_bytes", tool, field, len(raw), l.MaxBytes)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("tool '%s': %s is not JSON: %w", tool, field, err)
	}
	if n := countKeywords(doc, l.MaxKeywords); n > l.MaxKeywords {
		return nil, fmt.Errorf("tool '%s': %s has more than %d keywords, over max_schema_keywords (%d): shrink the schema, or raise max_schema_keywords", tool, field, l.MaxKeywords, l.MaxKeywords)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{})
	url := "car:///tools/" + tool + "/" + field + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("tool '%s': %s is not a valid JSON Schema: %s", tool, field, schemaErrorText(err))
	}
	v, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("tool '%s': %s is not a valid JSON Schema: %s", tool, field, schemaErrorText(err))
	}
	if err := checkShape(v, l); err != nil {
		return nil, fmt.Errorf("tool '%s': %s: %w", tool, field, err)
	}
	return v, nil
}

// compileTool checks a schema and compiles its parameter validator.
func compileTool(s protocol.ToolSchema, l SchemaLimits) (*Tool, error) {
	if strings.TrimSpace(s.Name) == "" {
		return nil, fmt.Errorf("name is required (a non-empty string)")
	}
	if rl := s.RateLimit; rl != nil && (rl.MaxCalls == 0 || rl.IntervalSecs <= 0) {
		return nil, fmt.Errorf("tool '%s': rate_limit needs max_calls >= 1 and interval_secs > 0", s.Name)
	}
	absentParams := isAbsent(s.Parameters)
	if absentParams {
		s.Parameters = json.RawMessage(`{}`)
	}
	params, err := compileSchema(s.Name, "parameters", s.Parameters, l)
	if err != nil {
		return nil, err
	}
	if absentParams {
		params = nil // the empty schema accepts every value: nothing to check per call
	}
	t := &Tool{Schema: s, validator: params, nameValue: s.Name, spanName: SpanToolCall + s.Name, evalBudget: l.MaxEvaluations, digest: idempotency.SchemaDigest(s)}
	if !isAbsent(s.Returns) {
		if t.returns, err = compileSchema(s.Name, "returns", s.Returns, l); err != nil {
			return nil, err
		}
	}
	if rl := s.RateLimit; rl != nil {
		// Seconds saturates: an interval of 1e10 s is a limit of max_calls
		// for practically ever, never an overflow into no limit at all.
		t.tokenEvery = min(protocol.Seconds(rl.IntervalSecs/float64(rl.MaxCalls)), maxTokenEvery)
		t.limiter = rate.NewLimiter(rate.Every(t.tokenEvery), int(rl.MaxCalls))
	}
	if s.CacheTTLSecs != nil && *s.CacheTTLSecs > 0 {
		t.cache = newResultCache(protocol.Seconds(float64(*s.CacheTTLSecs)))
	}
	return t, nil
}
