package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/parslee-ai/car-server/internal/agents"
	"github.com/parslee-ai/car-server/internal/store/file"
)

func TestConcurrentIssueTokenCommandsKeepEveryAgent(t *testing.T) {
	home := t.TempDir()
	const issuers = 8
	tokens := make([]string, issuers)
	errs := make([]error, issuers)
	var wg sync.WaitGroup
	for i := range tokens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tokens[i], errs[i] = runIssueToken(home, fmt.Sprint("agent-", i))
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(binary, "agents", "list", "--json")
	cmd.Env = append(os.Environ(), "CAR_HOME="+home)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("agents list: %v", err)
	}
	var list struct {
		Agents []agents.IssuedAgent `json:"agents"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("agents list --json printed %q: %v", out, err)
	}
	if len(list.Agents) != issuers {
		t.Fatalf("%d concurrent issue-token commands left %d agents: %s", issuers, len(list.Agents), out)
	}
	for i, token := range tokens {
		ok, err := file.VerifyToken(filepath.Join(home, "agent-tokens.json"), fmt.Sprint("agent-", i), token)
		if err != nil || !ok {
			t.Errorf("agent-%d's printed token does not verify: %v", i, err)
		}
	}
}
