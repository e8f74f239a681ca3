package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
)

// DecodeError is a malformed proposal; its message names the field and the
// action.
type DecodeError struct{ Msg string }

func (e *DecodeError) Error() string { return e.Msg }

// actionWire is Action as it arrives, with pointers where a default applies.
type actionWire struct {
	ID                string            `json:"id"`
	Type              *string           `json:"type"`
	Tool              string            `json:"tool"`
	Parameters        map[string]any    `json:"parameters"`
	Preconditions     []Precondition    `json:"preconditions"`
	ExpectedEffects   map[string]any    `json:"expected_effects"`
	StateDependencies []string          `json:"state_dependencies"`
	Dependencies      []string          `json:"dependencies"`
	ReadSet           []string          `json:"read_set"`
	WriteSet          []string          `json:"write_set"`
	Assumptions       []json.RawMessage `json:"assumptions"`
	InvocationMode    string            `json:"invocation_mode"`
	Await             []string          `json:"await"`
	Reversibility     *string           `json:"reversibility"`
	Compensation      json.RawMessage   `json:"compensation"`
	Idempotent        *bool             `json:"idempotent"`
	MaxRetries        *uint32           `json:"max_retries"`
	FailureBehavior   *string           `json:"failure_behavior"`
	TimeoutMs         *uint64           `json:"timeout_ms"`
	Metadata          map[string]any    `json:"metadata"`
}

// Bounds on per-action fields, so a budget can neither overflow nor buy an
// unbounded number of attempts.
const (
	MaxRetriesLimit = 100
	TimeoutMsLimit  = 24 * 60 * 60 * 1000
)

// MaxActionDepth bounds how deeply one action's JSON nests (the action
// object is level 1, its parameters level 2): every pass over parameters —
// classification, policies, references — then costs their size, not more.
const MaxActionDepth = 64

// DefaultMaxIDBytes is the longest proposal or action id accepted
// (max_action_id_bytes): every event of an action carries its id, so the
// event log's cost of an action is bounded by it.
const DefaultMaxIDBytes = 256

// DecodeProposal decodes a proposal and applies the IR's defaults, with ids
// of at most DefaultMaxIDBytes. Unknown fields are ignored; numbers stay
// exact (json.Number). Ids are not minted here: the runtime does that.
func DecodeProposal(raw []byte) (*ActionProposal, error) {
	return DecodeProposalLimited(raw, DefaultMaxIDBytes)
}

// DecodeProposalLimited is DecodeProposal with ids of at most maxIDBytes
// (<= 0: DefaultMaxIDBytes).
func DecodeProposalLimited(raw []byte, maxIDBytes int) (*ActionProposal, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, &DecodeError{Msg: "param 'proposal' is required: an ActionProposal object {id?, source?, actions: Action[]}"}
	}
	p, ok := decodeProposalFast(raw)
	if !ok {
		var err error
		if p, err = decodeProposalReflect(raw); err != nil {
			return nil, err
		}
	}
	if err := checkIDs(p, maxIDBytes); err != nil {
		return nil, err
	}
	return p, nil
}

// checkIDs refuses a proposal or action id longer than maxIDBytes.
func checkIDs(p *ActionProposal, maxIDBytes int) error {
	if maxIDBytes <= 0 {
		maxIDBytes = DefaultMaxIDBytes
	}
	tooLong := func(where string, n int) error {
		return &DecodeError{Msg: fmt.Sprintf("%s: field 'id' is %d bytes; at most %d are accepted (max_action_id_bytes): use a shorter id, or omit it and the daemon mints one", where, n, maxIDBytes)}
	}
	if len(p.ID) > maxIDBytes {
		return tooLong("proposal", len(p.ID))
	}
	for i := range p.Actions {
		if n := len(p.Actions[i].ID); n > maxIDBytes {
			return tooLong(fmt.Sprintf("proposal.actions[%d]", i), n)
		}
	}
	return nil
}

// decodeProposalReflect is DecodeProposal through the reflecting decoder:
// every proposal, and the words of every error.
func decodeProposalReflect(raw []byte) (*ActionProposal, error) {
	var head struct {
		ID        *string           `json:"id"`
		Source    *string           `json:"source"`
		Timestamp *string           `json:"timestamp"`
		Actions   []json.RawMessage `json:"actions"`
		Context   map[string]any    `json:"context"`
		Strict    *bool             `json:"strict"`
	}
	if err := strictDecode(raw, &head); err != nil {
		return nil, &DecodeError{Msg: "proposal: " + fieldError(err, "an ActionProposal object {id?, source?, actions: Action[]}")}
	}
	if head.Actions == nil {
		return nil, &DecodeError{Msg: "proposal: field 'actions' is required (an array of Action)"}
	}
	p := &ActionProposal{Actions: make([]Action, 0, len(head.Actions)), Context: head.Context}
	p.ID = deref(head.ID)
	p.Source = deref(head.Source)
	if p.Source == "" {
		p.Source = "unknown"
	}
	p.Timestamp = deref(head.Timestamp)
	p.Strict = head.Strict != nil && *head.Strict
	var warn fieldWarnings
	unknownMembers(raw, "proposal", headMembers, &warn)
	for i, ra := range head.Actions {
		a, err := decodeAction(ra)
		if err != nil {
			where := fmt.Sprintf("proposal.actions[%d]", i)
			if a.ID != "" && len(a.ID) <= DefaultMaxIDBytes { // a longer one is not worth echoing
				where += fmt.Sprintf(" (id '%s')", a.ID)
			}
			return nil, &DecodeError{Msg: where + ": " + err.Error()}
		}
		unknownMembers(ra, actionWhere(i, a.ID), actionMembers, &warn)
		p.Actions = append(p.Actions, a)
	}
	p.FieldWarnings = warn.result()
	return p, nil
}

// unknownMembers adds to warn the member names of obj that no name of known
// matches, as encoding/json matches them (regardless of case).
func unknownMembers(obj []byte, where string, known []string, warn *fieldWarnings) {
	jsonvalue.Members(obj, func(name, _ []byte) bool {
		var s string
		if json.Unmarshal(append(append([]byte{'"'}, name...), '"'), &s) != nil {
			return true
		}
		for _, k := range known {
			if strings.EqualFold(s, k) {
				return true
			}
		}
		warn.add(where, s, known)
		return true
	})
}

// decodeAction decodes one action; when it fails, the action carries the id
// as far as it can be read, for the message.
func decodeAction(raw json.RawMessage) (Action, error) {
	a, err := decodeActionFields(raw)
	if err != nil {
		var idOnly struct {
			ID any `json:"id"`
		}
		_ = json.Unmarshal(raw, &idOnly)
		a.ID, _ = idOnly.ID.(string)
	}
	return a, err
}

func decodeActionFields(raw json.RawMessage) (Action, error) {
	var a Action
	if d := jsonvalue.Depth(raw); d > MaxActionDepth {
		return a, fmt.Errorf("nests %d levels deep; at most %d are accepted (the action object is level 1): flatten its parameters", d, MaxActionDepth)
	}
	var w actionWire
	if err := strictDecode(raw, &w); err != nil {
		return a, errors.New(fieldError(err, "an Action object"))
	}
	return fromWire(&w)
}

// fromWire applies the IR's defaults and checks to a decoded action.
func fromWire(w *actionWire) (Action, error) {
	var a Action
	a.ID = w.ID
	if w.Type == nil {
		return a, errors.New("field 'type' is required: one of tool_call, state_write, state_read, assertion")
	}
	a.Type = ActionType(*w.Type)
	switch a.Type {
	case ActionToolCall, ActionStateWrite, ActionStateRead, ActionAssertion:
	default:
		return a, fmt.Errorf("field 'type' must be one of tool_call, state_write, state_read, assertion; got '%s'", *w.Type)
	}
	a.Tool = w.Tool
	if a.Type == ActionToolCall && strings.TrimSpace(a.Tool) == "" {
		return a, errors.New("field 'tool' is required when type is tool_call")
	}
	a.Parameters = w.Parameters
	if a.Parameters == nil {
		a.Parameters = map[string]any{}
	}
	a.Preconditions = w.Preconditions
	for i := range a.Preconditions {
		if a.Preconditions[i].Key == "" {
			return a, fmt.Errorf("field 'preconditions[%d].key' is required", i)
		}
		if a.Preconditions[i].Operator == "" {
			a.Preconditions[i].Operator = "eq"
		}
	}
	a.ExpectedEffects = w.ExpectedEffects
	a.StateDependencies = w.StateDependencies
	a.Dependencies = w.Dependencies
	a.ReadSet, a.WriteSet, a.Assumptions = w.ReadSet, w.WriteSet, w.Assumptions
	a.InvocationMode = w.InvocationMode
	if a.InvocationMode == "" {
		a.InvocationMode = ModeOneShot
	}
	switch a.InvocationMode {
	case ModeOneShot, ModeStreaming, ModeLongRunning:
	default:
		return a, fmt.Errorf("field 'invocation_mode' must be one_shot, streaming or long_running; got '%s'", a.InvocationMode)
	}
	a.Await = w.Await
	a.Reversibility = Irreversible
	if w.Reversibility != nil {
		a.Reversibility = Reversibility(*w.Reversibility)
		switch a.Reversibility {
		case Reversible, Compensable, Irreversible:
		default:
			return a, fmt.Errorf("field 'reversibility' must be reversible, compensable or irreversible; got '%s'", *w.Reversibility)
		}
	}
	a.Compensation = w.Compensation
	a.Idempotent = w.Idempotent != nil && *w.Idempotent
	a.MaxRetries = 3
	a.MaxRetriesUnset = w.MaxRetries == nil
	if w.MaxRetries != nil {
		a.MaxRetries = *w.MaxRetries
	}
	if a.MaxRetries > MaxRetriesLimit {
		return a, fmt.Errorf("field 'max_retries' must be at most %d, got %d", MaxRetriesLimit, a.MaxRetries)
	}
	a.FailureBehavior = FailAbort
	if w.FailureBehavior != nil {
		a.FailureBehavior = FailureBehavior(*w.FailureBehavior)
		switch a.FailureBehavior {
		case FailAbort, FailRetry, FailSkip:
		default:
			return a, fmt.Errorf("field 'failure_behavior' must be abort, retry or skip; got '%s'", *w.FailureBehavior)
		}
	}
	a.TimeoutMs = w.TimeoutMs
	if a.TimeoutMs != nil && (*a.TimeoutMs == 0 || *a.TimeoutMs > TimeoutMsLimit) {
		return a, fmt.Errorf("field 'timeout_ms' must be 1 to %d (24 hours); omit it for the daemon's default budget", uint64(TimeoutMsLimit))
	}
	a.Metadata = w.Metadata
	return a, nil
}

// DecodeValue decodes one JSON value keeping numbers exact (json.Number);
// empty input is null.
func DecodeValue(raw []byte) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	if jsonvalue.Valid(raw) {
		v, _ := parseValue(raw, 0)
		return v, nil
	}
	var v any // for the decoder's error
	if err := strictDecode(raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// errTrailing is input holding more than one JSON value: decoding only the
// first would silently drop the rest.
var errTrailing = errors.New("unexpected data after the first JSON value")

// strictDecode decodes exactly one JSON value, with exact numbers.
func strictDecode(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errTrailing
	}
	return nil
}

// fieldError turns a decoding error into "field 'x' must be ...".
func fieldError(err error, whole string) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return fmt.Sprintf("must be %s, got a JSON %s", whole, te.Value)
		}
		return fmt.Sprintf("field '%s' must be %s, got a JSON %s", te.Field, KindName(te.Type.Kind().String()), te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, errTrailing) {
		return "not valid JSON: " + err.Error()
	}
	return err.Error()
}

// KindName names the JSON type a Go kind decodes from ("a string"), for
// error messages that tell a client what to send.
func KindName(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "an array"
	case "map", "struct", "interface":
		return "an object"
	case "uint", "uint8", "uint16", "uint32", "uint64":
		return "a non-negative integer"
	case "int", "int8", "int16", "int32", "int64", "float32", "float64":
		return "a number"
	}
	return "a " + kind
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
