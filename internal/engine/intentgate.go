package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/parslee-ai/car-server/internal/approvals"
	"github.com/parslee-ai/car-server/protocol"
)

// The intent gate: what the work is for (the operator's intent.json,
// narrowed by a connection's session.intent.set) bounds what a proposal may
// do. Each action gets a verdict at admission:
//   - forbidden (a forbidden tool or capability): the proposal is rejected;
//   - influenced by untrusted data (the taint ledger) and out of intent: the
//     proposal is rejected, naming the taint and where it came from;
//   - out of intent but not influenced (drift): a person is asked, through
//     the approval ledger, under a content-bound fingerprint;
//   - anything else is allowed.
// The gate is one entry of the admission chain, after the flow gate; a
// reload swaps the intent it reads, never the gate or the ledger.

// Intent capabilities: the flow categories and the permission tiers.
const (
	CapNetwork         = "network"
	CapFilesystemWrite = "filesystem_write"
	CapMessaging       = "messaging"
	CapShell           = "shell"
)

// IntentCapabilities are the capability names an intent may list.
var IntentCapabilities = []string{CapNetwork, CapFilesystemWrite, CapMessaging, CapShell, "tier:read_only", "tier:sandbox_edit", "tier:full_access"}

// Defaults of the intent's bounds.
const (
	DefaultMaxIntentPatterns  = 256
	DefaultMaxIntentTextBytes = 4096
	maxIntentFileBytes        = 1 << 20
)

// EventIntentViolation records an action the intent gate refused.
const EventIntentViolation EventKind = "intent_violation"

// IntentFile is the operator's intent file under $CAR_HOME.
const IntentFile = "intent.json"

// WorkIntent is what work is for (protocol.WorkIntent), validated.
type WorkIntent = protocol.WorkIntent

// intents holds the operator's intent; nil is none.
type intents struct {
	operator atomic.Pointer[WorkIntent]
}

// ValidateIntent checks an intent's patterns and capability names against
// the bounds; the error names the field.
func ValidateIntent(in *WorkIntent, maxPatterns, maxText int) error {
	if len(in.Intent) > maxText {
		return fmt.Errorf("intent: the text is %d bytes; at most %d are accepted (max_intent_text_bytes): state the purpose, not the data", len(in.Intent), maxText)
	}
	n := 0
	for _, f := range []struct {
		name string
		list []string
	}{{"allowed_tools", in.AllowedTools}, {"forbidden_tools", in.ForbiddenTools}, {"untrusted_tools", in.UntrustedTools}} {
		for _, p := range f.list {
			if p == "" || strings.Count(p, "*") > 1 || (strings.Contains(p, "*") && !strings.HasSuffix(p, "*")) {
				return fmt.Errorf("%s: pattern '%s' must be a tool name or a prefix ending in '*'", f.name, p)
			}
		}
		n += len(f.list)
	}
	for _, f := range []struct {
		name string
		list []string
	}{{"forbidden_capabilities", in.ForbiddenCapabilities}, {"allowed_capabilities", in.AllowedCapabilities}} {
		for _, c := range f.list {
			if !slices.Contains(IntentCapabilities, c) {
				return fmt.Errorf("%s: unknown capability '%s' (known: %s)", f.name, c, strings.Join(IntentCapabilities, ", "))
			}
		}
		n += len(f.list)
	}
	if n > maxPatterns {
		return fmt.Errorf("intent: %d patterns and capabilities; at most %d are accepted (max_intent_patterns)", n, maxPatterns)
	}
	return nil
}

// LoadIntentFile reads the operator's intent. A missing file is no intent
// (nil, nil); a file that cannot be read or decoded, or names an unknown
// field or capability, is an error naming the file.
func LoadIntentFile(path string, maxPatterns, maxText int) (*WorkIntent, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("intent file %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxIntentFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("intent file %s: %w", path, err)
	}
	if len(data) > maxIntentFileBytes {
		return nil, fmt.Errorf("intent file %s is more than %d bytes", path, maxIntentFileBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var in WorkIntent
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("intent file %s: %w (expected {intent, allowed_tools?, forbidden_tools?, forbidden_capabilities?, allowed_capabilities?, untrusted_tools?})", path, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("intent file %s: more than one JSON value", path)
	}
	if err := ValidateIntent(&in, maxPatterns, maxText); err != nil {
		return nil, fmt.Errorf("intent file %s: %w", path, err)
	}
	return &in, nil
}

// SetOperatorIntent replaces the operator's intent in force (start,
// SIGHUP); nil is none. The gate and the taint ledger stay as they are.
func (rt *Runtime) SetOperatorIntent(in *WorkIntent) { rt.integ.intents.operator.Store(in) }

// OperatorIntent is the operator's intent in force, or nil.
func (rt *Runtime) OperatorIntent() *WorkIntent { return rt.integ.intents.operator.Load() }

// ErrIntentWidening is a session intent that would allow what the
// operator's, or the session's own, does not.
var ErrIntentWidening = errors.New("a session intent can only narrow the intent in force")

// SessionIntent is the connection's own intent, or nil.
func (s *Session) SessionIntent() *WorkIntent { return s.integ.intent.Load() }

// SetSessionIntent sets the connection's own intent. It may only narrow:
// allowed_tools within the operator's and the session's current ones, and
// it cannot drop a forbidden tool, a forbidden capability or an untrusted
// tool the session's current intent lists (the operator's always apply).
func (rt *Runtime) SetSessionIntent(s *Session, in *WorkIntent) (*WorkIntent, error) {
	if err := ValidateIntent(in, rt.opts.MaxIntentPatterns, rt.opts.MaxIntentTextBytes); err != nil {
		return nil, err
	}
	if in.AllowedCapabilities != nil {
		return nil, errors.New("allowed_capabilities: only the operator's intent.json sets allowed capabilities; a session narrows with forbidden_capabilities")
	}
	s.integ.mu.Lock()
	defer s.integ.mu.Unlock()
	var wider []string
	if op := rt.OperatorIntent(); op != nil && in.AllowedTools != nil {
		wider = append(wider, uncovered("allowed tool", op.AllowedTools, in.AllowedTools)...)
	}
	if cur := s.integ.intent.Load(); cur != nil {
		if in.AllowedTools == nil && cur.AllowedTools != nil {
			wider = append(wider, "allowed_tools omitted (every tool) while "+quoteList(cur.AllowedTools)+" is in force")
		} else {
			wider = append(wider, uncovered("allowed tool", cur.AllowedTools, in.AllowedTools)...)
		}
		for _, f := range []struct {
			name      string
			cur, next []string
		}{{"forbidden tool", cur.ForbiddenTools, in.ForbiddenTools}, {"forbidden capability", cur.ForbiddenCapabilities, in.ForbiddenCapabilities}, {"untrusted tool", cur.UntrustedTools, in.UntrustedTools}} {
			for _, p := range f.cur {
				if !slices.Contains(f.next, p) {
					wider = append(wider, fmt.Sprintf("dropping %s '%s'", f.name, p))
				}
			}
		}
	}
	if len(wider) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrIntentWidening, strings.Join(wider, ", "))
	}
	next := *in
	s.integ.intent.Store(&next)
	return &next, nil
}

// ClearSessionIntent drops the connection's own intent (the operator's
// stays in force).
func (s *Session) ClearSessionIntent() { s.integ.intent.Store(nil) }

// toolCapabilities are the capabilities a tool call uses: its permission
// tier and the categories its name's words say.
func (rt *Runtime) toolCapabilities(a *protocol.Action) []string {
	caps := []string{"tier:" + rt.Classify(a).Tier.String()}
	if a.Type != protocol.ActionToolCall {
		return caps
	}
	var network, messaging, shell, fsTarget, fsWrite bool
	for _, w := range strings.FieldsFunc(strings.ToLower(a.Tool), func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < '0' || r > '9')
	}) {
		switch w {
		case "http", "https", "fetch", "curl", "wget", "url", "web", "webhook", "upload", "download", "request", "api", "socket":
			network = true
		case "email", "mail", "message", "messaging", "slack", "sms", "notify", "chat", "post", "send", "tweet":
			messaging = true
		case "shell", "bash", "sh", "zsh", "exec", "execute", "command", "cmd", "terminal", "powershell", "run":
			shell = true
		case "file", "files", "fs", "dir", "directory", "folder", "path", "disk":
			fsTarget = true
		case "write", "delete", "remove", "rm", "move", "mv", "rename", "create", "mkdir", "append", "edit", "save", "put", "chmod", "truncate":
			fsWrite = true
		}
	}
	if network {
		caps = append(caps, CapNetwork)
	}
	if messaging {
		caps = append(caps, CapMessaging)
	}
	if shell {
		caps = append(caps, CapShell)
	}
	if fsTarget && fsWrite {
		caps = append(caps, CapFilesystemWrite)
	}
	return caps
}

// intentVerdict is one action's standing against the intents in force.
type intentVerdict struct {
	forbidden string // why it is forbidden, or ""
	outside   string // why it is out of intent, or ""
}

// judge is the verdict on a against the operator's and the session's
// intents (either may be nil).
func (rt *Runtime) judge(a *protocol.Action, intents ...*WorkIntent) intentVerdict {
	var v intentVerdict
	builtin := a.Type != protocol.ActionToolCall
	var caps []string
	if !builtin && slices.ContainsFunc(intents, func(in *WorkIntent) bool {
		return in != nil && (len(in.ForbiddenCapabilities) > 0 || in.AllowedCapabilities != nil)
	}) {
		caps = rt.toolCapabilities(a) // classifying is the costly part: only when an intent names capabilities
	}
	for k, in := range intents {
		if in == nil {
			continue
		}
		whose := [...]string{"the operator's intent", "this connection's intent"}[min(k, 1)]
		if !builtin && in.ForbiddenTools != nil && allows(in.ForbiddenTools, a.Tool) {
			v.forbidden = fmt.Sprintf("tool '%s' is forbidden by %s", a.Tool, whose)
			return v
		}
		if builtin {
			continue // state and assertion actions are never out of intent themselves
		}
		for _, c := range caps {
			if slices.Contains(in.ForbiddenCapabilities, c) {
				v.forbidden = fmt.Sprintf("tool '%s' uses capability '%s', forbidden by %s", a.Tool, c, whose)
				return v
			}
		}
		if v.outside != "" {
			continue
		}
		if !allows(in.AllowedTools, a.Tool) {
			v.outside = fmt.Sprintf("tool '%s' is not in %s's allowed_tools %s", a.Tool, whose, quoteList(in.AllowedTools))
			continue
		}
		if in.AllowedCapabilities != nil {
			for _, c := range caps {
				if !slices.Contains(in.AllowedCapabilities, c) {
					v.outside = fmt.Sprintf("tool '%s' uses capability '%s', which %s's allowed_capabilities %s do not name", a.Tool, c, whose, quoteList(in.AllowedCapabilities))
					break
				}
			}
		}
	}
	return v
}

// untrusted reports whether a tool's output is untrusted: listed by an
// intent in force, or labelled a flow source.
func (rt *Runtime) untrusted(tool string, intents ...*WorkIntent) bool {
	if tool == "" {
		return false
	}
	for _, in := range intents {
		if in != nil && in.UntrustedTools != nil && allows(in.UntrustedTools, tool) {
			return true
		}
	}
	if l, ok := rt.ToolLabels().Tools[tool]; ok && l.Source {
		return true
	}
	return false
}

// intentGate is the admission gate of the intents in force.
type intentGate struct{ rt *Runtime }

func (intentGate) Name() string { return "intent" }

func (g intentGate) Admit(ctx context.Context, sub *Submission) error {
	rt := g.rt
	op, se := rt.OperatorIntent(), sub.Session.SessionIntent()
	an, err := rt.analyzeTaint(ctx, sub, sub.graph, op, se)
	if err != nil {
		return err
	}
	sub.taint = an
	if err := rt.taintGuard(ctx, an, declaresWrites(sub.Proposal)); err != nil {
		return err
	}
	if op == nil && se == nil {
		return nil
	}
	refused, drift := rt.intentVerdicts(sub.Proposal.Actions, op, se, "action", func(i int) string { return an.influence[i] },
		func(a *protocol.Action) Event {
			return Event{ProposalID: sub.Proposal.ID, ActionID: a.ID, Connection: sub.Session.ID, Data: map[string]any{"tool": a.Tool}}
		})
	if len(refused) > 0 {
		return fmt.Errorf("intent gate refused the proposal: %s", limitList(refused))
	}
	if len(drift) == 0 {
		return nil
	}
	if err := rt.escalate(ctx, sub, drift); err != nil {
		return fmt.Errorf("intent gate: %w", err)
	}
	return nil
}

// intentVerdicts judges each of actions against the intents op and se. A
// forbidden action, or one out of intent and influenced (influence(i) not
// empty), is refused: named as label 'ID' in refused, and recorded as an
// intent_violation event, which event starts. One out of intent only is an
// escalation a person decides.
func (rt *Runtime) intentVerdicts(actions []protocol.Action, op, se *WorkIntent, label string, influence func(i int) string, event func(a *protocol.Action) Event) (refused []string, drift []escalation) {
	for i := range actions {
		a := &actions[i]
		v, inf := rt.judge(a, op, se), influence(i)
		switch {
		case v.forbidden != "":
			refused = append(refused, fmt.Sprintf("%s '%s': %s", label, a.ID, v.forbidden))
		case v.outside != "" && inf != "":
			refused = append(refused, fmt.Sprintf("%s '%s': %s, and it is influenced by untrusted data: %s", label, a.ID, v.outside, inf))
		case v.outside != "":
			drift = append(drift, escalation{step: i, why: v.outside + " (out of intent, not influenced by untrusted data)",
				fingerprint: intentFingerprint(a), signal: "intent drift"})
			continue
		default:
			continue
		}
		e := event(a)
		e.Kind = EventIntentViolation
		e.Data["forbidden"], e.Data["influenced"] = v.forbidden != "", inf != ""
		rt.Events.Append(e)
	}
	return refused, drift
}

// limitList joins at most 20 reasons and counts the rest.
func limitList(list []string) string {
	const most = 20
	if len(list) <= most {
		return strings.Join(list, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(list[:most], "; "), len(list)-most)
}

// intentFingerprint names one out-of-intent operation: approving it does
// not approve the operation anywhere else.
func intentFingerprint(a *protocol.Action) string {
	h := sha256.New()
	fmt.Fprintf(h, "intent-drift\x00%s", approvals.Fingerprint(a))
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// VerifyIntent adds the intent gate's verdicts to a verify result, as
// proposal.submit from this connection would find them, without recording
// or asking anything.
func (rt *Runtime) VerifyIntent(ctx context.Context, res *VerifyResult, p *protocol.ActionProposal, s *Session, tenant string) {
	op, se := rt.OperatorIntent(), s.SessionIntent()
	c := protocol.CheckRecord{Name: "intent", Ran: op != nil || se != nil, Tier: TierDecision,
		Verifies:     "no action uses a forbidden tool or capability; no action out of intent is influenced by untrusted data (the taint ledger); out-of-intent work waits for a person",
		CannotVerify: "what a tool does beyond what its name says; keys named only by references"}
	if !c.Ran {
		res.Evidence.Checks = append(res.Evidence.Checks, c)
		return
	}
	sub := &Submission{Proposal: p, Session: s, Tenant: tenant}
	an, err := rt.analyzeTaint(ctx, sub, nil, op, se)
	if err != nil {
		c.Findings++
		res.Valid = false
		res.Issues = append(res.Issues, protocol.VerifyIssue{Severity: "error", Tier: c.Tier, Message: "intent: " + err.Error() + "; proposal.submit would reject it"})
		res.Evidence.Checks = append(res.Evidence.Checks, c)
		return
	}
	for i := range p.Actions {
		a := &p.Actions[i]
		v := rt.judge(a, op, se)
		switch {
		case v.forbidden != "":
			c.Findings++
			res.Valid = false
			res.Issues = append(res.Issues, protocol.VerifyIssue{ActionID: a.ID, Severity: "error", Tier: c.Tier, Message: "intent: " + v.forbidden + "; proposal.submit would reject it"})
		case v.outside != "" && an.influence[i] != "":
			c.Findings++
			res.Valid = false
			res.Issues = append(res.Issues, protocol.VerifyIssue{ActionID: a.ID, Severity: "error", Tier: c.Tier, Message: "intent: " + v.outside + ", and it is influenced by untrusted data: " + an.influence[i] + "; proposal.submit would reject it"})
		case v.outside != "":
			c.Findings++
			res.Issues = append(res.Issues, protocol.VerifyIssue{ActionID: a.ID, Severity: "warning", Tier: c.Tier, Message: fmt.Sprintf("intent: %s; proposal.submit escalates it to approval (fingerprint %s)", v.outside, intentFingerprint(a))})
		}
	}
	res.Evidence.Checks = append(res.Evidence.Checks, c)
}

// EvaluateIntent is the intent gate's verdict on each action of p as the
// session would submit it, without side effects; nil when no intent is in
// force.
func (rt *Runtime) EvaluateIntent(ctx context.Context, p *protocol.ActionProposal, s *Session, tenant string) ([]protocol.IntentDecision, error) {
	op, se := rt.OperatorIntent(), s.SessionIntent()
	if op == nil && se == nil {
		return nil, nil
	}
	an, err := rt.analyzeTaint(ctx, &Submission{Proposal: p, Session: s, Tenant: tenant}, nil, op, se)
	if err != nil {
		return nil, err
	}
	out := make([]protocol.IntentDecision, len(p.Actions))
	for i := range p.Actions {
		a := &p.Actions[i]
		v := rt.judge(a, op, se)
		d := protocol.IntentDecision{ActionID: a.ID, Verdict: protocol.IntentAllowed}
		switch {
		case v.forbidden != "":
			d.Verdict, d.Reason = protocol.IntentForbidden, v.forbidden
		case v.outside != "" && an.influence[i] != "":
			d.Verdict, d.Reason = protocol.IntentInfluenced, v.outside+", and it is influenced by untrusted data: "+an.influence[i]
		case v.outside != "":
			d.Verdict, d.Reason, d.Fingerprint = protocol.IntentDrift, v.outside, intentFingerprint(a)
		}
		out[i] = d
	}
	return out, nil
}

// declaresWrites reports whether any action of p names a key it writes.
func declaresWrites(p *protocol.ActionProposal) bool {
	for i := range p.Actions {
		if len(taintWrites(&p.Actions[i])) > 0 {
			return true
		}
	}
	return false
}
