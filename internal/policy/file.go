package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/parslee-ai/car-server/protocol"
)

// fileRules is one operator policy file.
type fileRules struct {
	DenyTool              []string                `toml:"deny_tool"`
	DenyConnector         []string                `toml:"deny_connector"`
	DenyKeyword           []string                `toml:"deny_keyword"`
	DenyToolParam         []fileDenyToolParam     `toml:"deny_tool_param"`
	AllowToolParam        []fileAllowToolParam    `toml:"allow_tool_param"`
	DenyToolParamMatching []fileDenyParamMatching `toml:"deny_tool_param_matching"`
	RateLimitTool         []fileRateLimitTool     `toml:"rate_limit_tool"`
	RequireClaim          []fileRequireClaim      `toml:"require_claim"`
	TraceRule             []toml.Primitive        `toml:"trace_rule"`
	Quorum                []fileQuorum            `toml:"quorum"`
}

type fileQuorum struct {
	Tool      string `toml:"tool"`
	Approvers int    `toml:"approvers"`
}

type fileDenyToolParam struct {
	Tool     string  `toml:"tool"`
	Param    string  `toml:"param"`
	Equals   any     `toml:"equals"`
	Contains *string `toml:"contains"`
}

type fileRequireClaim struct {
	Claim  string `toml:"claim"`
	Tool   string `toml:"tool"`
	Equals any    `toml:"equals"`
}

type fileAllowToolParam struct {
	Tool  string   `toml:"tool"`
	Param string   `toml:"param"`
	Allow []string `toml:"allow"`
}

type fileDenyParamMatching struct {
	Tool    string  `toml:"tool"`
	Param   string  `toml:"param"`
	Matches *string `toml:"matches"`
}

type fileRateLimitTool struct {
	Tool         string   `toml:"tool"`
	MaxCalls     *int64   `toml:"max_calls"`
	IntervalSecs *float64 `toml:"interval_secs"`
}

// LoadDir reads every *.toml in dir, in sorted file-name order, into one
// engine. A missing directory is an empty rule set; any malformed file fails
// the whole load, naming the file and what is wrong.
func LoadDir(dir string) (*Engine, int, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return NewEngine(), 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read policy directory %s: %w", dir, err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".toml") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var all []Policy
	for _, name := range names {
		ps, err := LoadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, 0, err
		}
		all = append(all, ps...)
	}
	return NewEngine(all...), len(names), nil
}

// Ranges of the rule fields: an interval below a millisecond never limits,
// and every admitted call is remembered until it leaves the interval.
const (
	minIntervalSecs = 0.001
	maxRateCalls    = 1_000_000
	maxTOMLDepth    = 32
)

// LoadFile parses one operator policy file.
func LoadFile(path string) ([]Policy, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy file %s: %w", path, err)
	}
	if d := tomlDepth(text); d > maxTOMLDepth {
		return nil, fmt.Errorf("policy file %s: arrays and inline tables nest %d levels deep; at most %d are accepted", path, d, maxTOMLDepth)
	}
	var fr fileRules
	md, err := toml.Decode(string(text), &fr)
	if err != nil {
		return nil, fmt.Errorf("policy file %s: %w", path, err)
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("policy file %s: %s", path, fmt.Sprintf(format, args...))
	}
	if undecoded := md.Undecoded(); len(undecoded) > 0 {
		keys := make([]string, len(undecoded))
		for i, k := range undecoded {
			keys[i] = k.String()
		}
		if len(fr.TraceRule) == 0 {
			return nil, fail("unknown key %s (known: deny_tool, deny_connector, deny_keyword, deny_tool_param, allow_tool_param, deny_tool_param_matching, rate_limit_tool, require_claim, quorum)", strings.Join(keys, ", "))
		}
	}
	if len(fr.TraceRule) > 0 {
		return nil, fail("trace_rule is not enforced by this daemon, so it is refused rather than silently ignored; express the rule with deny_tool, deny_tool_param, allow_tool_param, deny_tool_param_matching or rate_limit_tool")
	}

	var out []Policy
	for i, t := range fr.DenyTool {
		if t == "" {
			return nil, fail("deny_tool[%d] is empty", i)
		}
		out = append(out, Policy{Name: "deny_tool:" + t, Description: fmt.Sprintf("deny tool '%s' (%s)", t, path), Rule: DenyTool{Tool: t}})
	}
	for i, slug := range fr.DenyConnector {
		if slug == "" {
			return nil, fail("deny_connector[%d] is empty", i)
		}
		out = append(out, Policy{Name: "deny_connector:" + slug, Description: fmt.Sprintf("deny every tool of connector '%s' (%s)", slug, path), Rule: DenyConnector{Slug: slug}})
	}
	for i, kw := range fr.DenyKeyword {
		if kw == "" {
			return nil, fail("deny_keyword[%d] is empty: it would match every action", i)
		}
		out = append(out, Policy{Name: "deny_keyword:" + kw, Description: fmt.Sprintf("deny any parameter carrying a keyword (%s)", path), Rule: DenyKeyword{Keyword: kw}})
	}
	for i, r := range fr.DenyToolParam {
		if r.Tool == "" || r.Param == "" {
			return nil, fail("deny_tool_param[%d] needs tool and param", i)
		}
		rule := DenyToolParam{Tool: r.Tool, Param: r.Param}
		if r.Equals != nil {
			rule.HasEquals = true
			rule.Equals = tomlToJSON(r.Equals)
		}
		if r.Contains != nil {
			if *r.Contains == "" {
				return nil, fail("deny_tool_param[%d].contains is empty: omit it for a presence deny", i)
			}
			rule.Contains = *r.Contains
		}
		out = append(out, Policy{Name: fmt.Sprintf("deny_tool_param:%s.%s", r.Tool, r.Param), Description: fmt.Sprintf("deny tool '%s' by parameter '%s' (%s)", r.Tool, r.Param, path), Rule: rule})
	}
	for i, r := range fr.AllowToolParam {
		if r.Tool == "" || r.Param == "" {
			return nil, fail("allow_tool_param[%d] needs tool and param", i)
		}
		out = append(out, Policy{Name: fmt.Sprintf("allow_tool_param:%s.%s", r.Tool, r.Param), Description: fmt.Sprintf("allow tool '%s' only with listed values of '%s' (%s)", r.Tool, r.Param, path), Rule: AllowToolParam(r)})
	}
	for i, r := range fr.DenyToolParamMatching {
		if r.Tool == "" || r.Param == "" || r.Matches == nil {
			return nil, fail("deny_tool_param_matching[%d] needs tool, param and matches", i)
		}
		out = append(out, Policy{Name: fmt.Sprintf("deny_tool_param_matching:%s.%s", r.Tool, r.Param), Description: fmt.Sprintf("deny tool '%s' when parameter '%s' matches a pattern (%s)", r.Tool, r.Param, path), Rule: NewDenyToolParamMatching(r.Tool, r.Param, *r.Matches)})
	}
	for i, r := range fr.RequireClaim {
		if r.Claim == "" {
			return nil, fail("require_claim[%d] needs claim", i)
		}
		rule := RequireClaim{Claim: r.Claim, Tool: r.Tool}
		if r.Equals != nil {
			rule.HasValue, rule.Value = true, tomlToJSON(r.Equals)
		}
		out = append(out, Policy{Name: "require_claim:" + r.Claim, Description: fmt.Sprintf("require scope claim '%s' from a trusted submitter (%s)", r.Claim, path), Rule: rule})
	}
	for i, r := range fr.RateLimitTool {
		if r.Tool == "" || r.MaxCalls == nil || r.IntervalSecs == nil {
			return nil, fail("rate_limit_tool[%d] needs tool, max_calls and interval_secs", i)
		}
		if *r.MaxCalls < 0 || *r.MaxCalls > maxRateCalls {
			return nil, fail("rate_limit_tool[%d] (tool '%s'): max_calls must be 0 to %d, got %d", i, r.Tool, maxRateCalls, *r.MaxCalls)
		}
		if !(*r.IntervalSecs >= minIntervalSecs) || math.IsInf(*r.IntervalSecs, 0) {
			return nil, fail("rate_limit_tool[%d] (tool '%s'): interval_secs must be a finite number of seconds, at least %g (a shorter interval never limits), got %g", i, r.Tool, minIntervalSecs, *r.IntervalSecs)
		}
		out = append(out, Policy{
			Name:        "rate_limit_tool:" + r.Tool,
			Description: fmt.Sprintf("at most %d calls to '%s' per %gs, daemon-wide (%s)", *r.MaxCalls, r.Tool, *r.IntervalSecs, path),
			Rule:        &RateLimitTool{Tool: r.Tool, MaxCalls: int(*r.MaxCalls), Interval: protocol.Seconds(*r.IntervalSecs)},
		})
	}
	for i, r := range fr.Quorum {
		q := Quorum(r)
		if err := checkQuorum(q); err != nil {
			return nil, fail("quorum[%d] %v", i, err)
		}
		out = append(out, Policy{
			Name:        "quorum:" + r.Tool,
			Description: fmt.Sprintf("%d distinct people approve every call of '%s' (%s)", r.Approvers, r.Tool, path),
			Rule:        q,
		})
	}
	return out, nil
}

// tomlDepth is the deepest nesting of arrays and inline tables in a TOML
// document, read before the parser (which has no depth limit) sees it.
// Brackets in strings and comments do not count; a [table] header counts as
// one level and [[array]] as two, which is harmless.
func tomlDepth(text []byte) int {
	depth, deepest := 0, 0
	for i := 0; i < len(text); i++ {
		switch c := text[i]; c {
		case '#':
			for i < len(text) && text[i] != '\n' {
				i++
			}
		case '"', '\'':
			i = skipTOMLString(text, i)
		case '[', '{':
			depth++
			deepest = max(deepest, depth)
		case ']', '}':
			depth--
		}
	}
	return deepest
}

// skipTOMLString returns the index of the last byte of the string that
// opens at text[i]: basic or literal, single-line or multi-line.
func skipTOMLString(text []byte, i int) int {
	q := text[i]
	delim := []byte{q}
	if i+2 < len(text) && text[i+1] == q && text[i+2] == q {
		delim = []byte{q, q, q}
	}
	for j := i + len(delim); j < len(text); j++ {
		if q == '"' && text[j] == '\\' {
			j++
			continue
		}
		if bytes.HasPrefix(text[j:], delim) {
			return j + len(delim) - 1
		}
	}
	return len(text)
}

// tomlToJSON turns a decoded TOML value into the JSON value it stands for.
func tomlToJSON(v any) any {
	switch x := v.(type) {
	case int64:
		return json.Number(strconv.FormatInt(x, 10))
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = tomlToJSON(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = tomlToJSON(e)
		}
		return out
	case time.Time:
		return x.Format(time.RFC3339Nano)
	}
	return v
}
