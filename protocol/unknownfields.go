package protocol

import (
	"fmt"
	"strings"
)

// MaxFieldWarnings bounds the unknown-field warnings one proposal gets: past
// it one more line says how many were left out, so a proposal of 10,000
// misspelt actions costs a bounded reply.
const MaxFieldWarnings = 20

// fieldAliases are names clients send for a field of the IR under another
// name, each with the field it means.
var fieldAliases = map[string]string{
	"depends_on": "dependencies", "deps": "dependencies", "after": "dependencies", "needs": "dependencies",
	"params": "parameters", "args": "parameters", "arguments": "parameters", "input": "parameters",
	"tool_name": "tool", "name": "tool", "action_type": "type", "kind": "type",
	"timeout": "timeout_ms", "retries": "max_retries", "on_failure": "failure_behavior", "on_error": "failure_behavior",
	"mode": "invocation_mode", "waits_for": "await", "meta": "metadata",
}

// fieldWarnings collects what a decoder meets that the IR does not know.
type fieldWarnings struct {
	lines []string
	more  int // warnings past MaxFieldWarnings
}

// add records an unknown member name of the object at where (one of
// headMembers or actionMembers).
func (w *fieldWarnings) add(where, name string, known []string) {
	if len(w.lines) >= MaxFieldWarnings {
		w.more++
		return
	}
	line := fmt.Sprintf("%s: unknown field %q", where, name)
	if s := suggestField(name, known); s != "" {
		line += fmt.Sprintf(" (did you mean %q?)", s)
	}
	w.lines = append(w.lines, line+"; it is ignored")
}

// then is w followed by next, within MaxFieldWarnings.
func (w *fieldWarnings) then(next *fieldWarnings) *fieldWarnings {
	for _, line := range next.lines {
		if len(w.lines) >= MaxFieldWarnings {
			w.more++
			continue
		}
		w.lines = append(w.lines, line)
	}
	w.more += next.more
	return w
}

// result is the warnings as a ProposalResult carries them; nil when there
// are none.
func (w *fieldWarnings) result() []string {
	if w.more > 0 {
		return append(w.lines, fmt.Sprintf("%d more unknown fields are not listed", w.more))
	}
	return w.lines
}

// actionWhere names an action in a warning: by id when it has one that is
// worth echoing, else by index.
func actionWhere(i int, id string) string {
	if id != "" && len(id) <= 64 {
		return fmt.Sprintf("action '%s'", id)
	}
	return fmt.Sprintf("proposal.actions[%d]", i)
}

// suggestField is the known field a misspelt name most likely means, or "".
func suggestField(name string, known []string) string {
	lower := strings.ToLower(name)
	if s, ok := fieldAliases[lower]; ok && contains(known, s) {
		return s
	}
	best, bestDist := "", 3 // at most two edits away
	for _, k := range known {
		if strings.EqualFold(name, k) {
			return k
		}
		if len(lower) >= 5 && len(k) >= 5 && commonPrefix(lower, k) >= 5 {
			return k
		}
		if d := editDistance(lower, k, bestDist); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// editDistance is the Levenshtein distance of a and b, or limit when it is
// at least limit (names are short; a long one is not compared).
func editDistance(a, b string, limit int) int {
	if len(a) > 64 || len(b) > 64 || abs(len(a)-len(b)) >= limit {
		return limit
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], limit)
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// StrictFieldsError is the refusal of a proposal with unknown fields under
// strict field checking (strict_fields, or the proposal's strict: true).
func StrictFieldsError(warnings []string) error {
	return &DecodeError{Msg: "proposal has fields the IR does not know, refused under strict field checking (strict_fields, or the proposal's strict: true): " +
		strings.Join(warnings, "; ") + ". Fix the names, or submit without strict to run it with them ignored"}
}
