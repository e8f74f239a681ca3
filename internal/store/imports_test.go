package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// module is the import path every package of the daemon starts with.
const module = "github.com/parslee-ai/car-server/"

// layerRules are the arrows that must never exist, directly or through
// other packages: the domain packages keep their vocabulary and know
// nothing of where it is stored, and the engine talks to the store's
// interfaces, never to a backend (the caller hands it its parts).
var layerRules = []struct {
	from      []string
	forbidden []string
	why       string
}{
	{
		from:      []string{"internal/approvals", "internal/idempotency", "internal/messaging", "internal/runs", "internal/agents"},
		forbidden: []string{"internal/store", "internal/journal"},
		why:       "a domain package keeps its vocabulary; its storage lives in internal/store/file or internal/store/postgres, and internal/store may import the domain package's types, not the reverse",
	},
	{
		from:      []string{"internal/engine"},
		forbidden: []string{"internal/store/file", "internal/store/postgres"},
		why:       "the engine takes its state and stores from engine.Options; cmd/car-server (or a test helper) picks the backend",
	},
	{
		from:      []string{"internal/connectors"},
		forbidden: []string{"internal/rpc", "internal/store/file", "internal/store/postgres", "internal/journal"},
		why:       "the connectors are handed to the rpc layer by cmd/car-server; they keep no store of the daemon's, only their own files under $CAR_HOME",
	},
	{
		from:      []string{"internal/engine"},
		forbidden: []string{"internal/connectors"},
		why:       "the engine runs a connector's tool through engine.ToolExecutor and never speaks MCP itself",
	},
}

// TestLayersImportOnlyDownward fails when one of layerRules' arrows
// appears; the message names the chain of imports that makes it.
func TestLayersImportOnlyDownward(t *testing.T) {
	var roots []string
	for _, r := range layerRules {
		for _, p := range r.from {
			roots = append(roots, module+p)
		}
	}
	graph := importGraph(t, roots)
	for _, r := range layerRules {
		for _, from := range r.from {
			if _, ok := graph[module+from]; !ok {
				t.Errorf("go list did not report %s; update layerRules if it moved", from)
				continue
			}
			for _, to := range r.forbidden {
				if chain := importChain(graph, module+from, module+to); chain != nil {
					t.Errorf("%s imports %s: %s\n\t(%s)", from, to, strings.Join(chain, " -> "), r.why)
				}
			}
		}
	}
}

// importGraph runs go list -deps over roots and returns, for each package
// it reports, the packages that package imports (not its tests').
func importGraph(t *testing.T, roots []string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-deps", "-json=ImportPath,Imports"}, roots...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps failed (is the go command on PATH?): %v\n%s", err, stderr.String())
	}
	graph := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("decode the output of go list: %v", err)
		}
		graph[p.ImportPath] = p.Imports
	}
	return graph
}

// importChain returns a shortest chain of imports from from to to, both
// included, or nil when from does not reach to.
func importChain(graph map[string][]string, from, to string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == to {
			var chain []string
			for ; p != ""; p = prev[p] {
				chain = append([]string{strings.TrimPrefix(p, module)}, chain...)
			}
			return chain
		}
		for _, next := range graph[p] {
			if _, seen := prev[next]; !seen {
				prev[next] = p
				queue = append(queue, next)
			}
		}
	}
	return nil
}

// TestImportChainFindsTransitiveArrows: the search reports an arrow made
// through another package, and none where there is no path.
func TestImportChainFindsTransitiveArrows(t *testing.T) {
	g := map[string][]string{"a": {"b", "x"}, "b": {"c"}, "c": nil, "x": nil}
	if got := strings.Join(importChain(g, "a", "c"), " "); got != "a b c" {
		t.Errorf("chain a to c: %q, want \"a b c\"", got)
	}
	if got := importChain(g, "b", "x"); got != nil {
		t.Errorf("chain b to x: %q, want none", got)
	}
}
