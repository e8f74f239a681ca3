package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/parslee-ai/car-server/internal/atomicfile"
	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/internal/store"
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

// Postures is the daemon's per-agent posture: the policy in force, kept in
// memory, over a store.Postures that keeps it durably (the policy file, or
// the shared store's row). Every mutation goes through the store under its
// lock; a change made elsewhere (another daemon) is read back when the
// store says so. It is safe for concurrent use.
type Postures struct {
	src     store.Postures
	writeMu sync.Mutex // one mutation or reload at a time in this process
	mu      sync.Mutex // guards p; never held across I/O, so the gate never waits on the store
	p       Policy
	stop    func()
	onError func(error)
}

// OpenPostures reads the policy file at path; a missing file is the
// balanced default with no overrides.
func OpenPostures(path string) (*Postures, error) {
	return NewPostures(context.Background(), PostureFile(path), nil)
}

// NewPostures reads the policy src keeps (none: the balanced default with
// no overrides) and follows the changes src reports until Close. onError
// hears a change that could not be read back (nil ignores it: the policy
// in force stays, and the next change reads it again).
func NewPostures(ctx context.Context, src store.Postures, onError func(error)) (*Postures, error) {
	s := &Postures{src: src, p: defaultPolicy(), onError: onError}
	p, found, err := readDoc(ctx, src)
	if err != nil {
		return nil, err
	}
	if found {
		s.p = p
	}
	s.stop = src.Watch(s.reload)
	return s, nil
}

// Close stops following the store's changes.
func (s *Postures) Close() {
	if s.stop != nil {
		s.stop()
	}
}

// reloadTimeout bounds the read of a changed policy.
const reloadTimeout = 15 * time.Second

// reload reads the policy the store now holds and puts it in force. It
// takes the mutations' turn, so an older copy read before this process's
// own write cannot replace what that write put in force.
func (s *Postures) reload() {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), reloadTimeout)
	defer cancel()
	p, found, err := readDoc(ctx, s.src)
	if err != nil {
		if s.onError != nil {
			s.onError(err)
		}
		return
	}
	if !found {
		p = defaultPolicy()
	}
	s.mu.Lock()
	s.p = p
	s.mu.Unlock()
}

func defaultPolicy() Policy {
	return Policy{Default: Presets[DefaultPreset], Agents: map[string]TierPosture{}}
}

// readDoc reads and decodes the policy src keeps.
func readDoc(ctx context.Context, src store.Postures) (Policy, bool, error) {
	doc, found, err := src.Read(ctx)
	if err != nil || !found {
		return Policy{}, false, err
	}
	p, err := decodePolicy(doc)
	if err != nil {
		return Policy{}, false, fmt.Errorf("the agent permissions policy is not valid (%v); set it again with agent_permissions.set_default", err)
	}
	return p, true, nil
}

func decodePolicy(doc []byte) (Policy, error) {
	var p Policy
	if err := json.Unmarshal(doc, &p); err != nil {
		return Policy{}, err
	}
	if p.Agents == nil {
		p.Agents = map[string]TierPosture{}
	}
	return p, nil
}

// postureFile is the policy file, written atomically under its lock.
type postureFile struct{ path string }

// PostureFile is the store.Postures of a single daemon: the policy file at
// path (0600), rewritten atomically under path + ".lock".
func PostureFile(path string) store.Postures { return postureFile{path: path} }

// Read reads the file; a missing one holds no document.
func (f postureFile) Read(context.Context) (json.RawMessage, bool, error) {
	b, err := atomicfile.ReadFile(f.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("agent permissions %s: %w", f.path, err)
	}
	if _, err := decodePolicy(b); err != nil {
		return nil, false, fmt.Errorf("agent permissions %s is not valid JSON (%v); fix it or move it aside", f.path, err)
	}
	return b, true, nil
}

// Update holds the file's lock across the read, the change and the atomic
// write, so another writer's update is kept, not overwritten.
func (f postureFile) Update(ctx context.Context, change func(json.RawMessage, bool) (json.RawMessage, error)) error {
	unlock, err := lockFile(ctx, f.path)
	if err != nil {
		return err
	}
	defer unlock()
	cur, found, err := f.Read(ctx)
	if err != nil {
		return err
	}
	next, err := change(cur, found)
	if err != nil {
		return err
	}
	return atomicfile.Write(f.path, append(next, '\n'))
}

// Watch never calls fn: only this process writes the file it reads.
func (postureFile) Watch(func()) func() { return func() {} }

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
func (s *Postures) Set(ctx context.Context, agentID, mode string, tier *policy.Tier, self bool) (Policy, error) {
	if err := CheckMode(mode); err != nil {
		return Policy{}, err
	}
	tiers := []policy.Tier{policy.ReadOnly, policy.SandboxEdit, policy.FullAccess}
	if tier != nil {
		tiers = []policy.Tier{*tier}
	}
	return s.mutate(ctx, func(cur *Policy) error {
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
					return fmt.Errorf("%w: %s is %s at %s", ErrLoosen, agentID, now, t)
				}
			}
			o.set(t, mode)
		}
		cur.Agents[agentID] = o
		return nil
	})
}

// SetDefault moves the default posture to a preset, or one tier of it.
func (s *Postures) SetDefault(ctx context.Context, preset string, tier *policy.Tier, mode string) (Policy, error) {
	return s.mutate(ctx, func(next *Policy) error {
		switch {
		case preset != "":
			p, ok := Presets[preset]
			if !ok {
				return fmt.Errorf("unknown preset '%s' (use cautious, balanced or trusting)", preset)
			}
			next.Default = p
		case tier != nil:
			if err := CheckMode(mode); err != nil {
				return err
			}
			next.Default.set(*tier, mode)
		default:
			return errors.New("give a preset, or a tier and a mode")
		}
		return nil
	})
}

// Reset drops agentID's override.
func (s *Postures) Reset(ctx context.Context, agentID string) (Policy, error) {
	return s.mutate(ctx, func(next *Policy) error {
		delete(next.Agents, agentID)
		return nil
	})
}

// mutate applies change to the policy the store holds and makes the
// result the policy in force. The store holds its lock across the read,
// the change and the write, so another writer's update is kept, not
// overwritten with this daemon's older copy.
func (s *Postures) mutate(ctx context.Context, change func(*Policy) error) (Policy, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	var next Policy
	err := s.src.Update(ctx, func(cur json.RawMessage, found bool) (json.RawMessage, error) {
		next = s.Get()
		if found {
			p, err := decodePolicy(cur)
			if err != nil {
				return nil, fmt.Errorf("the agent permissions policy held is not valid (%v); reset it with agent_permissions.set_default", err)
			}
			next = p
		}
		if err := change(&next); err != nil {
			return nil, err
		}
		return json.MarshalIndent(next, "", "  ")
	})
	if err != nil {
		return Policy{}, err
	}
	s.mu.Lock()
	s.p = next
	s.mu.Unlock()
	return s.Get(), nil
}
