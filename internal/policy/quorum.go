package policy

import (
	"fmt"
	"path"
	"time"

	"github.com/parslee-ai/car-server/protocol"
)

// MaxQuorum bounds a quorum rule's approvers: more people than this do not
// watch one daemon's approvals, and every approver's name is kept on the
// decision.
const MaxQuorum = 16

// Quorum requires Approvers distinct people to approve a call of any tool
// Tool matches (a path.Match pattern: deploy_* matches deploy_prod). A
// call it matches needs a recorded approval whatever its tier. It denies
// nothing itself: the permission gate reads it (Engine.Quorum).
type Quorum struct {
	Tool      string
	Approvers int
}

// Evaluate implements Rule: a quorum never denies.
func (Quorum) Evaluate(*protocol.Action, StateReader, time.Time) (string, bool) { return "", false }

// Matches reports whether the rule covers tool.
func (q Quorum) Matches(tool string) bool {
	ok, err := path.Match(q.Tool, tool)
	return err == nil && ok
}

// checkQuorum refuses a rule that could never hold or never match.
func checkQuorum(q Quorum) error {
	if q.Tool == "" {
		return fmt.Errorf("needs tool (a tool name or a pattern such as deploy_*)")
	}
	if _, err := path.Match(q.Tool, ""); err != nil {
		return fmt.Errorf("tool %q is not a valid pattern (%v)", q.Tool, err)
	}
	if q.Approvers < 1 || q.Approvers > MaxQuorum {
		return fmt.Errorf("(tool '%s'): approvers must be 1 to %d, got %d", q.Tool, MaxQuorum, q.Approvers)
	}
	return nil
}

// Quorum is how many distinct people must approve a call of tool: the
// largest Approvers of the quorum rules that match it, 0 when none does.
func (e *Engine) Quorum(tool string) int {
	if tool == "" {
		return 0
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	n := 0
	for _, i := range e.quorums {
		if q := e.policies[i].Rule.(Quorum); q.Matches(tool) {
			n = max(n, q.Approvers)
		}
	}
	return n
}
