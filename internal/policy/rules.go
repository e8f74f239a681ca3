package policy

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/protocol"
)

// DenyTool denies every call to one tool.
type DenyTool struct{ Tool string }

// ScopeTool implements ToolScoped.
func (r DenyTool) ScopeTool() string { return r.Tool }

// DeniesTool implements Wholesale: every call of its tool is denied.
func (r DenyTool) DeniesTool(tool, _ string) bool { return tool == r.Tool }

// Evaluate implements Rule.
func (r DenyTool) Evaluate(a *protocol.Action, _ StateReader, _ time.Time) (string, bool) {
	if a.Type == protocol.ActionToolCall && a.Tool == r.Tool {
		return fmt.Sprintf("tool '%s' is denied", r.Tool), true
	}
	return "", false
}

// DenyConnector denies every tool of one MCP connector: the daemon tools
// named mcp_<slug>_<tool>. The daemon refuses a connector whose slug would
// make another's names ambiguous (one slug, then '_', beginning another), so
// the prefix names exactly this connector's tools.
type DenyConnector struct{ Slug string }

// DeniesTool implements Wholesale: every tool of its connector is denied.
func (r DenyConnector) DeniesTool(tool, owner string) bool {
	return owner == r.Slug || strings.HasPrefix(tool, "mcp_"+r.Slug+"_")
}

// Evaluate implements Rule.
func (r DenyConnector) Evaluate(a *protocol.Action, _ StateReader, _ time.Time) (string, bool) {
	if a.Type == protocol.ActionToolCall && strings.HasPrefix(a.Tool, "mcp_"+r.Slug+"_") {
		return fmt.Sprintf("connector '%s' is denied (tool '%s')", r.Slug, a.Tool), true
	}
	return "", false
}

// DenyToolParam denies a call to Tool whose parameter Param matches: equals
// Equals (when HasEquals) and contains Contains (when non-empty); with
// neither set, carrying the parameter at all is denied. An absent parameter
// is never a violation.
type DenyToolParam struct {
	Tool, Param string
	Equals      any
	HasEquals   bool
	Contains    string
}

// ScopeTool implements ToolScoped.
func (r DenyToolParam) ScopeTool() string { return r.Tool }

// Evaluate implements Rule.
func (r DenyToolParam) Evaluate(a *protocol.Action, state StateReader, _ time.Time) (string, bool) {
	if a.Type != protocol.ActionToolCall || a.Tool != r.Tool {
		return "", false
	}
	v, ok := param(a, state, r.Param, false)
	if !ok {
		return "", false
	}
	switch {
	case r.HasEquals && r.Contains != "":
		if jsonvalue.Equal(v, r.Equals) && strings.Contains(jsonvalue.String(v), r.Contains) {
			return fmt.Sprintf("parameter '%s' of tool '%s' has a denied value", r.Param, r.Tool), true
		}
	case r.HasEquals:
		if jsonvalue.Equal(v, r.Equals) {
			return fmt.Sprintf("parameter '%s' of tool '%s' has a denied value", r.Param, r.Tool), true
		}
	case r.Contains != "":
		if strings.Contains(jsonvalue.String(v), r.Contains) {
			return fmt.Sprintf("parameter '%s' of tool '%s' contains a denied pattern", r.Param, r.Tool), true
		}
	default:
		return fmt.Sprintf("tool '%s' may not be called with parameter '%s'", r.Tool, r.Param), true
	}
	return "", false
}

// RequireState denies every action unless state[Key] equals Value as JSON.
type RequireState struct {
	Key   string
	Value any
}

// Evaluate implements Rule.
func (r RequireState) Evaluate(_ *protocol.Action, state StateReader, _ time.Time) (string, bool) {
	v, ok := state.State(r.Key)
	if ok && jsonvalue.Equal(v, r.Value) {
		return "", false
	}
	return fmt.Sprintf("state '%s' must be %s", r.Key, jsonvalue.Canonical(r.Value)), true
}

// DenyKeyword denies any action carrying Keyword in the string form of any
// parameter value, at any depth.
type DenyKeyword struct{ Keyword string }

// Evaluate implements Rule.
func (r DenyKeyword) Evaluate(a *protocol.Action, _ StateReader, _ time.Time) (string, bool) {
	for _, k := range jsonvalue.SortedKeys(a.Parameters) {
		if containsDeep(a.Parameters[k], r.Keyword) {
			return fmt.Sprintf("parameter '%s' carries a denied keyword", k), true
		}
	}
	return "", false
}

func containsDeep(v any, kw string) bool {
	switch x := v.(type) {
	case string:
		return strings.Contains(x, kw)
	case []any:
		for _, e := range x {
			if containsDeep(e, kw) {
				return true
			}
		}
		return false
	case map[string]any:
		for k, e := range x {
			if strings.Contains(k, kw) || containsDeep(e, kw) {
				return true
			}
		}
		return false
	}
	return strings.Contains(jsonvalue.String(v), kw)
}

// AllowToolParam denies a call to Tool unless parameter Param is present and
// its string form is exactly one of Allow. It fails closed: absent, empty
// list and unlisted are all denied.
type AllowToolParam struct {
	Tool, Param string
	Allow       []string
}

// ScopeTool implements ToolScoped.
func (r AllowToolParam) ScopeTool() string { return r.Tool }

// Evaluate implements Rule.
func (r AllowToolParam) Evaluate(a *protocol.Action, state StateReader, _ time.Time) (string, bool) {
	if a.Type != protocol.ActionToolCall || a.Tool != r.Tool {
		return "", false
	}
	v, ok := param(a, state, r.Param, true)
	if !ok {
		return fmt.Sprintf("tool '%s' needs parameter '%s' set to an allowed value", r.Tool, r.Param), true
	}
	s := jsonvalue.String(v)
	for _, allowed := range r.Allow {
		if s == allowed {
			return "", false
		}
	}
	if len(r.Allow) == 0 {
		return fmt.Sprintf("tool '%s' is denied: no value of parameter '%s' is allowed", r.Tool, r.Param), true
	}
	return fmt.Sprintf("parameter '%s' of tool '%s' is not one of the allowed values", r.Param, r.Tool), true
}

// DenyToolParamMatching denies a call to Tool whose parameter Param matches
// a regular expression (unanchored). A pattern that did not compile denies
// every call to the tool.
type DenyToolParamMatching struct {
	Tool, Param string
	re          *regexp.Regexp
	compileErr  error
}

// NewDenyToolParamMatching compiles pattern once.
func NewDenyToolParamMatching(tool, param, pattern string) *DenyToolParamMatching {
	re, err := regexp.Compile(pattern)
	return &DenyToolParamMatching{Tool: tool, Param: param, re: re, compileErr: err}
}

// ScopeTool implements ToolScoped.
func (r *DenyToolParamMatching) ScopeTool() string { return r.Tool }

// Evaluate implements Rule.
func (r *DenyToolParamMatching) Evaluate(a *protocol.Action, state StateReader, _ time.Time) (string, bool) {
	if a.Type != protocol.ActionToolCall || a.Tool != r.Tool {
		return "", false
	}
	if r.compileErr != nil {
		return fmt.Sprintf("tool '%s' is denied: the rule's pattern for parameter '%s' does not compile", r.Tool, r.Param), true
	}
	v, ok := param(a, state, r.Param, false)
	if ok && r.re.MatchString(jsonvalue.String(v)) {
		return fmt.Sprintf("parameter '%s' of tool '%s' matches a denied pattern", r.Param, r.Tool), true
	}
	return "", false
}

// RateLimitTool is a sliding-window cap: a call is denied when admitting it
// would make it the MaxCalls+1-th call to Tool within the trailing Interval.
// A call this rule admits takes its slot at once (attempts are counted, not
// successes); a call it denies takes none.
type RateLimitTool struct {
	Tool     string
	MaxCalls int
	Interval time.Duration

	mu       sync.Mutex
	admitted []time.Time
}

// ScopeTool implements ToolScoped.
func (r *RateLimitTool) ScopeTool() string { return r.Tool }

// Evaluate implements Rule.
func (r *RateLimitTool) Evaluate(a *protocol.Action, _ StateReader, now time.Time) (string, bool) {
	if a.Type != protocol.ActionToolCall || a.Tool != r.Tool {
		return "", false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cutoff := now.Add(-r.Interval)
	i := sort.Search(len(r.admitted), func(i int) bool { return r.admitted[i].After(cutoff) })
	r.admitted = r.admitted[i:]
	if len(r.admitted) >= r.MaxCalls {
		return fmt.Sprintf("tool '%s' is over its rate limit of %d calls per %s", r.Tool, r.MaxCalls, r.Interval), true
	}
	r.admitted = append(r.admitted, now)
	return "", false
}
