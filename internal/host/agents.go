package host

import (
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/parslee-ai/car-server/protocol"
)

// Agent statuses (host.set_status validates against these).
const (
	StatusIdle      = "idle"
	StatusRunning   = "running"
	StatusWaiting   = "waiting_for_approval"
	StatusPaused    = "paused"
	StatusCompleted = "completed"
	StatusErrored   = "errored"
	StatusStopped   = "stopped"
)

var statuses = []string{StatusIdle, StatusRunning, StatusWaiting, StatusPaused, StatusCompleted, StatusErrored, StatusStopped}

// Agent is one registered agent as every reader sees it. Its maps are the
// registry's own and are replaced, never modified: do not modify them.
type Agent = protocol.HostAgent

// AgentRequest is the params of host.register_agent.
type AgentRequest = protocol.HostAgentParams

// StatusRequest is the params of host.set_status.
type StatusRequest = protocol.HostStatusParams

// Agents returns every registered agent, sorted by id, for host.agents.
func (r *Registry) Agents() []Agent {
	r.mu.Lock()
	defer r.unlock()
	return r.agentsLocked()
}

func (r *Registry) agentsLocked() []Agent {
	out := make([]Agent, 0, len(r.agents))
	for _, a := range r.agents {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b Agent) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// RegisterAgent records an agent owned by conn, minting its id when none is
// given. The same connection registering the same id again updates it;
// another connection's id is refused. The registry keeps req's maps: do not
// modify them afterwards. Emits agent.registered.
func (r *Registry) RegisterAgent(conn string, req AgentRequest) (Agent, error) {
	if strings.TrimSpace(req.Name) == "" {
		return Agent{}, fmt.Errorf("%w: agent name is empty; give the agent a name", ErrInvalid)
	}
	if strings.TrimSpace(req.Kind) == "" {
		return Agent{}, fmt.Errorf("%w: agent kind is empty; give a kind such as \"cli\" or \"assistant\"", ErrInvalid)
	}
	r.mu.Lock()
	defer r.unlock()
	t := now()
	a, exists := r.agents[req.ID]
	switch {
	case req.ID == "":
		req.ID = "agent-" + uuid.NewString()
		exists = false
	case exists && a.SessionID != conn:
		return Agent{}, notOwner(req.ID)
	}
	if !exists {
		if n := r.countAgentsLocked(conn); n >= r.opts.MaxAgentsPerConn {
			return Agent{}, fmt.Errorf("%w: this connection already has %d agents registered, the most one connection may hold; unregister one first", ErrLimit, n)
		}
		a = Agent{ID: req.ID, Status: StatusIdle, SessionID: conn, RegisteredAt: t}
	}
	a.Name, a.Kind, a.Project, a.PID = req.Name, req.Kind, req.Project, req.PID
	a.Capabilities = slices.Clone(req.Capabilities)
	if a.Capabilities == nil {
		a.Capabilities = []string{}
	}
	a.Display, a.Metadata = req.Display, req.Metadata
	a.UpdatedAt = t
	r.agents[a.ID] = a
	r.emitLocked(KindAgentRegistered, a.ID, a.Name+" registered", map[string]any{"agent": a})
	return a, nil
}

// UnregisterAgent removes conn's agent; emits agent.unregistered.
func (r *Registry) UnregisterAgent(conn, agentID string) error {
	r.mu.Lock()
	defer r.unlock()
	a, err := r.ownedLocked(conn, agentID)
	if err != nil {
		return err
	}
	r.removeAgentLocked(a)
	return nil
}

// SetStatus changes the status of conn's agent, replacing its current task,
// message and payload with the request's; emits agent.status_changed.
func (r *Registry) SetStatus(conn string, req StatusRequest) (Agent, error) {
	if !slices.Contains(statuses, req.Status) {
		return Agent{}, fmt.Errorf("%w: unknown status '%s'; use one of %s", ErrInvalid, req.Status, strings.Join(statuses, ", "))
	}
	r.mu.Lock()
	defer r.unlock()
	a, err := r.ownedLocked(conn, req.AgentID)
	if err != nil {
		return Agent{}, err
	}
	a.CurrentTask, a.Message, a.Payload = req.CurrentTask, req.Message, req.Payload
	return r.setStatusLocked(a, req.Status, req.Message), nil
}

func (r *Registry) setStatusLocked(a Agent, status, message string) Agent {
	previous := a.Status
	a.Status = status
	a.UpdatedAt = now()
	r.agents[a.ID] = a
	r.emitLocked(KindAgentStatusChanged, a.ID, message, map[string]any{"agent": a, "previous_status": previous})
	return a
}

func (r *Registry) removeAgentLocked(a Agent) {
	delete(r.agents, a.ID)
	r.emitLocked(KindAgentUnregistered, a.ID, a.Name+" unregistered", map[string]any{"agent": a})
}

// ownedLocked finds agentID and checks that conn owns it.
func (r *Registry) ownedLocked(conn, agentID string) (Agent, error) {
	a, ok := r.agents[agentID]
	if !ok {
		return Agent{}, fmt.Errorf("%w: no agent '%s' is registered; host.agents lists them", ErrNotFound, agentID)
	}
	if a.SessionID != conn {
		return Agent{}, notOwner(agentID)
	}
	return a, nil
}

func (r *Registry) countAgentsLocked(conn string) int {
	n := 0
	for _, a := range r.agents {
		if a.SessionID == conn {
			n++
		}
	}
	return n
}

// notOwner reads exactly as upstream's refusal: "agent '<id>' is owned by another session".
func notOwner(agentID string) error {
	return fmt.Errorf("agent '%s' is %w", agentID, ErrNotOwner)
}
