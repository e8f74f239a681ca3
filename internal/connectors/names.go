package connectors

import (
	"fmt"
	"strings"

	"github.com/parslee-ai/car-server/internal/engine"
)

// Slug is a connector's name lower-cased, with every run of characters
// other than [a-z0-9] turned into one '_'.
func Slug(name string) string {
	var b strings.Builder
	under := false
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			under = false
			continue
		}
		if !under {
			b.WriteByte('_')
			under = true
		}
	}
	return b.String()
}

// Canonical is the name a proposal calls a connector's tool by.
func Canonical(slug, tool string) string {
	return engine.DaemonToolPrefix + slug + "_" + tool
}

// maxToolNameBytes bounds a tool's MCP name, as the spec's 128.
const maxToolNameBytes = 128

// checkToolName refuses a tool name outside [A-Za-z0-9_-] (dots and the rest
// would make the canonical name ambiguous or unsafe to show).
func checkToolName(name string) error {
	if name == "" {
		return fmt.Errorf("the server lists a tool with an empty name")
	}
	if len(name) > maxToolNameBytes {
		return fmt.Errorf("tool name is %d bytes, over %d", len(name), maxToolNameBytes)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("tool name %q has characters outside [A-Za-z0-9_-]; it cannot be enabled (ask the server's author to rename it)", name)
		}
	}
	return nil
}

// ambiguous reports whether two slugs would make tool names ambiguous:
// mcp_git_hub_x could be connector git's tool hub_x or git_hub's tool x.
func ambiguous(a, b string) bool {
	return strings.HasPrefix(a, b+"_") || strings.HasPrefix(b, a+"_")
}
