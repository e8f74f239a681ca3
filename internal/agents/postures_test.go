package agents_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/internal/agents"
	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/internal/store/file"
)

func openPostures(t *testing.T, path string) *agents.Postures {
	t.Helper()
	ps, err := file.OpenPostures(path)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// resolves fails unless agent's mode at each tier is want (read_only,
// sandbox_edit, full_access).
func resolves(t *testing.T, ps *agents.Postures, agent string, want [3]string) {
	t.Helper()
	for i, tier := range []policy.Tier{policy.ReadOnly, policy.SandboxEdit, policy.FullAccess} {
		if got, _ := ps.Resolve(agent, tier); got != want[i] {
			t.Errorf("%s at %s: %s, want %s", agent, tier, got, want[i])
		}
	}
}

func TestPresetsSetTheDefaultPosture(t *testing.T) {
	ps := openPostures(t, filepath.Join(t.TempDir(), "agent-permissions.json"))
	resolves(t, ps, "alice", [3]string{agents.AlwaysAllow, agents.RequireApproval, agents.RequireApproval}) // balanced, no file
	ctx := context.Background()
	for name, want := range map[string][3]string{
		"cautious": {agents.AlwaysAllow, agents.RequireApproval, agents.Deny},
		"balanced": {agents.AlwaysAllow, agents.RequireApproval, agents.RequireApproval},
		"trusting": {agents.AlwaysAllow, agents.AlwaysAllow, agents.RequireApproval},
	} {
		pol, err := ps.SetDefault(ctx, name, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		if pol.Default != agents.Presets[name] {
			t.Errorf("set_default %s returned default %+v", name, pol.Default)
		}
		resolves(t, ps, "alice", want)
	}
	if _, err := ps.SetDefault(ctx, "reckless", nil, ""); err == nil || !strings.Contains(err.Error(), "cautious, balanced or trusting") {
		t.Errorf("an unknown preset: %v", err)
	}
	// One tier changed over a preset (the map above runs in any order).
	if _, err := ps.SetDefault(ctx, "trusting", nil, ""); err != nil {
		t.Fatal(err)
	}
	tier := policy.FullAccess
	if _, err := ps.SetDefault(ctx, "", &tier, agents.Deny); err != nil {
		t.Fatal(err)
	}
	resolves(t, ps, "alice", [3]string{agents.AlwaysAllow, agents.AlwaysAllow, agents.Deny})
}

func TestAnOverrideWinsAndAnAgentCannotLoosenItsOwn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent-permissions.json")
	ps := openPostures(t, path)
	ctx := context.Background()
	sandbox := policy.SandboxEdit
	pol, err := ps.Set(ctx, "alice", agents.AlwaysAllow, &sandbox, false)
	if err != nil || pol.Agents["alice"].SandboxEdit != agents.AlwaysAllow {
		t.Fatalf("host sets alice's sandbox_edit: %+v %v", pol, err)
	}
	resolves(t, ps, "alice", [3]string{agents.AlwaysAllow, agents.AlwaysAllow, agents.RequireApproval})
	resolves(t, ps, "bob", [3]string{agents.AlwaysAllow, agents.RequireApproval, agents.RequireApproval})

	full := policy.FullAccess
	if _, err := ps.Set(ctx, "bob", agents.AlwaysAllow, &full, true); !errors.Is(err, agents.ErrLoosen) {
		t.Fatalf("bob loosening his own full_access: %v, want ErrLoosen", err)
	}
	if _, err := ps.Set(ctx, "bob", agents.Deny, nil, true); err != nil {
		t.Fatalf("bob tightening himself: %v", err)
	}
	resolves(t, ps, "bob", [3]string{agents.Deny, agents.Deny, agents.Deny})
	if _, err := ps.Set(ctx, "bob", agents.RequireApproval, &full, true); !errors.Is(err, agents.ErrLoosen) {
		t.Fatalf("bob loosening deny to require_approval: %v", err)
	}
	if _, err := ps.Set(ctx, "bob", "maybe", nil, false); err == nil {
		t.Fatal("an unknown mode was accepted")
	}

	pol, err = ps.Reset(ctx, "bob")
	if err != nil || len(pol.Agents) != 1 {
		t.Fatalf("reset bob: %+v %v", pol, err)
	}
	resolves(t, ps, "bob", [3]string{agents.AlwaysAllow, agents.RequireApproval, agents.RequireApproval})

	// What was written is what a restart reads.
	again := openPostures(t, path)
	resolves(t, again, "alice", [3]string{agents.AlwaysAllow, agents.AlwaysAllow, agents.RequireApproval})
	if got := again.Get(); len(got.Agents) != 1 || got.Default != agents.Presets[agents.DefaultPreset] {
		t.Fatalf("reopened: %+v", got)
	}
}
