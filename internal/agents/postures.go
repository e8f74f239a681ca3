package agents

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/parslee-ai/car-server/internal/policy"
)

// Posture modes: what happens to an agent's action at a tier.
const (
	AlwaysAllow     = "always_allow"
	RequireApproval = "require_approval"
	Deny            = "deny"
)

// TierPosture is a mode per tier; an absent tier falls through to the
// default posture (and, in the default, to the require_approval floor).
type TierPosture struct {
	ReadOnly    string `json:"read_only,omitempty"`
	SandboxEdit string `json:"sandbox_edit,omitempty"`
	FullAccess  string `json:"full_access,omitempty"`
}

// Policy is the whole per-agent posture: the default and the overrides.
type Policy struct {
	Default TierPosture            `json:"default"`
	Agents  map[string]TierPosture `json:"agents"`
}

// Presets of the default posture.
var Presets = map[string]TierPosture{
	"cautious": {ReadOnly: AlwaysAllow, SandboxEdit: RequireApproval, FullAccess: Deny},
	"balanced": {ReadOnly: AlwaysAllow, SandboxEdit: RequireApproval, FullAccess: RequireApproval},
	"trusting": {ReadOnly: AlwaysAllow, SandboxEdit: AlwaysAllow, FullAccess: RequireApproval},
}

// DefaultPreset is the default posture of a daemon with no policy file.
const DefaultPreset = "balanced"

// CheckMode refuses a mode that is not one of the three.
func CheckMode(m string) error {
	switch m {
	case AlwaysAllow, RequireApproval, Deny:
		return nil
	}
	return fmt.Errorf("unknown mode '%s' (use always_allow, require_approval or deny)", m)
}

func (p TierPosture) get(t policy.Tier) string {
	switch t {
	case policy.ReadOnly:
		return p.ReadOnly
	case policy.SandboxEdit:
		return p.SandboxEdit
	}
	return p.FullAccess
}

func (p *TierPosture) set(t policy.Tier, m string) {
	switch t {
	case policy.ReadOnly:
		p.ReadOnly = m
	case policy.SandboxEdit:
		p.SandboxEdit = m
	default:
		p.FullAccess = m
	}
}

// looser reports whether mode a admits more than b.
func looser(a, b string) bool { return rank(a) > rank(b) }

func rank(m string) int {
	switch m {
	case AlwaysAllow:
		return 2
	case RequireApproval:
		return 1
	}
	return 0
}

// Postures is the daemon's per-agent posture, kept in memory and in a file
// every mutation rewrites atomically. It is safe for concurrent use.
type Postures struct {
	path    string
	writeMu sync.Mutex // one mutation at a time: read, modify, write the file, install
	mu      sync.Mutex // guards p; never held across I/O, so the gate never waits on the disk
	p       Policy
}

// OpenPostures reads the policy file at path; a missing file is the
// balanced default with no overrides.
func OpenPostures(path string) (*Postures, error) {
	s := &Postures{path: path, p: Policy{Default: Presets[DefaultPreset], Agents: map[string]TierPosture{}}}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("agent permissions %s: %w", path, err)
	}
	if err := json.Unmarshal(b, &s.p); err != nil {
		return nil, fmt.Errorf("agent permissions %s is not valid JSON (%v); fix it or move it aside", path, err)
	}
	if s.p.Agents == nil {
		s.p.Agents = map[string]TierPosture{}
	}
	return s, nil
}

// Get returns a copy of the whole policy.
func (s *Postures) Get() Policy {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.copyLocked()
}

func (s *Postures) copyLocked() Policy {
	out := Policy{Default: s.p.Default, Agents: make(map[string]TierPosture, len(s.p.Agents))}
	for k, v := range s.p.Agents {
		out.Agents[k] = v
	}
	return out
}

// Resolve is the mode for agentID at tier: its override, else the
// default, else require_approval.
func (s *Postures) Resolve(agentID string, t policy.Tier) (mode string, override bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.p.Agents[agentID]; ok {
		if m := o.get(t); m != "" {
			return m, true
		}
	}
	if m := s.p.Default.get(t); m != "" {
		return m, false
	}
	return RequireApproval, false
}

// ErrLoosen refuses an agent that tries to loosen its own posture.
var ErrLoosen = errors.New("an agent cannot loosen its own posture")

// Set sets one tier of agentID's posture, or every tier when tier is nil.
// When self is true (the agent asks for itself), only a tightening is
// accepted. It returns the whole updated policy.
func (s *Postures) Set(agentID, mode string, tier *policy.Tier, self bool) (Policy, error) {
	if err := CheckMode(mode); err != nil {
		return Policy{}, err
	}
	tiers := []policy.Tier{policy.ReadOnly, policy.SandboxEdit, policy.FullAccess}
	if tier != nil {
		tiers = []policy.Tier{*tier}
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	cur := s.Get()
	o := cur.Agents[agentID]
	for _, t := range tiers {
		if self {
			now := o.get(t)
			if now == "" {
				now = cur.Default.get(t)
			}
			if now == "" {
				now = RequireApproval
			}
			if looser(mode, now) {
				return Policy{}, fmt.Errorf("%w: %s is %s at %s", ErrLoosen, agentID, now, t)
			}
		}
		o.set(t, mode)
	}
	cur.Agents[agentID] = o
	return s.commit(cur)
}

// SetDefault moves the default posture to a preset, or one tier of it.
func (s *Postures) SetDefault(preset string, tier *policy.Tier, mode string) (Policy, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	next := s.Get()
	switch {
	case preset != "":
		p, ok := Presets[preset]
		if !ok {
			return Policy{}, fmt.Errorf("unknown preset '%s' (use cautious, balanced or trusting)", preset)
		}
		next.Default = p
	case tier != nil:
		if err := CheckMode(mode); err != nil {
			return Policy{}, err
		}
		next.Default.set(*tier, mode)
	default:
		return Policy{}, errors.New("give a preset, or a tier and a mode")
	}
	return s.commit(next)
}

// Reset drops agentID's override.
func (s *Postures) Reset(agentID string) (Policy, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	next := s.Get()
	delete(next.Agents, agentID)
	return s.commit(next)
}

// commit writes next to the file, then makes it the policy in force; the
// caller holds writeMu.
func (s *Postures) commit(next Policy) (Policy, error) {
	b, err := json.MarshalIndent(next, "", "  ")
	if err != nil {
		return Policy{}, err
	}
	if err := writeFileAtomic(s.path, append(b, '\n')); err != nil {
		return Policy{}, err
	}
	s.mu.Lock()
	s.p = next
	s.mu.Unlock()
	return s.Get(), nil
}
