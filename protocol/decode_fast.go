package protocol

import (
	"strconv"
	"strings"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
)

// decodeProposalFast decodes, in one walk over the bytes, the proposals
// DecodeProposal meets most: valid JSON whose members have the types the
// IR gives them. It declines (ok false) anything else — a mistyped or
// repeated member, a member name in another case or escaped, actions with
// preconditions, assumptions or compensation, an action nested too deep,
// one its checks refuse — and DecodeProposal then decodes it with the
// reflecting decoder, which also words the error. What it returns is what
// that decoder returns (a fuzz test holds the two together).
func decodeProposalFast(raw []byte) (*ActionProposal, bool) {
	depth, valid := jsonvalue.ValidDepth(raw)
	if !valid {
		return nil, false
	}
	// An action is at the third level of a proposal: when nothing nests
	// deeper than an action may, no action needs measuring on its own.
	d := &fastDecoder{b: raw, deep: depth > MaxActionDepth+2}
	d.i = jsonvalue.SkipSpace(raw, 0)
	if raw[d.i] != '{' {
		return nil, false
	}
	p := &ActionProposal{}
	var id, source, timestamp *string
	var strict *bool
	var actions []Action
	var unknown []string
	sawActions := false
	ok := d.object(headMembers, &unknown, func(key string) bool {
		switch key {
		case "id":
			return d.optString(&id)
		case "source":
			return d.optString(&source)
		case "timestamp":
			return d.optString(&timestamp)
		case "context":
			return d.optObject(&p.Context)
		case "strict":
			return d.optBool(&strict)
		case "actions":
			if d.null() {
				return false // required: the thorough decoder says so
			}
			sawActions = true
			n := d.count()
			actions = make([]Action, 0, n)
			if d.names == nil {
				d.names = make(map[string]string, n+16) // the ids, and a few tools and parameter names
			}
			return d.array(func() bool {
				a, ok := d.action(len(actions))
				actions = append(actions, a)
				return ok
			})
		}
		return false
	})
	if !ok || !sawActions {
		return nil, false
	}
	if actions == nil {
		actions = []Action{}
	}
	p.Actions = actions
	p.ID = deref(id)
	p.Source = deref(source)
	if p.Source == "" {
		p.Source = "unknown"
	}
	p.Timestamp = deref(timestamp)
	p.Strict = strict != nil && *strict
	var head fieldWarnings
	for _, name := range unknown {
		head.add("proposal", name, headMembers)
	}
	p.FieldWarnings = head.then(&d.warnings).result()
	return p, true
}

var headMembers = []string{"id", "source", "timestamp", "actions", "context", "strict"}

var actionMembers = []string{"id", "type", "tool", "parameters", "preconditions", "expected_effects", "state_dependencies",
	"dependencies", "read_set", "write_set", "assumptions", "invocation_mode", "await", "reversibility", "compensation",
	"idempotent", "max_retries", "failure_behavior", "timeout_ms", "metadata"}

// fastDecoder walks valid JSON.
type fastDecoder struct {
	b []byte
	i int
	// names holds the strings of this proposal worth sharing: tool names,
	// and action ids, which dependencies name again.
	names map[string]string
	// floats reads numbers inside values as float64 (as encoding/json does
	// into an interface without UseNumber), else as json.Number.
	floats bool
	// deep says something in the proposal nests deeper than an action may,
	// so that each action's depth is measured.
	deep bool
	// warnings name the members the IR does not know.
	warnings fieldWarnings
}

// name reads a string into a string field, shared with an earlier equal
// name of the proposal (null leaves the field).
func (d *fastDecoder) name(s *string) bool {
	if d.null() {
		return true
	}
	if d.b[d.i] != '"' {
		return false
	}
	if d.names == nil {
		d.names = map[string]string{}
	}
	*s, d.i = parseKey(d.b, d.i, d.names)
	return true
}

// constants are the values of the IR's enumerations, so that a field that
// holds one needs no string of its own.
var constants = func() map[string]*string {
	m := map[string]*string{}
	for _, v := range []string{string(ActionToolCall), string(ActionStateWrite), string(ActionStateRead), string(ActionAssertion),
		ModeOneShot, ModeStreaming, ModeLongRunning, string(Reversible), string(Compensable), string(Irreversible),
		string(FailAbort), string(FailRetry), string(FailSkip)} {
		m[v] = &v
	}
	return m
}()

// enum reads a string into a *string field, pointing at the shared
// constant when it is one (null sets nil).
func (d *fastDecoder) enum(s **string) bool {
	if d.b[d.i] == '"' {
		end := jsonvalue.SkipString(d.b, d.i)
		if c, ok := constants[string(d.b[d.i+1:end-1])]; ok {
			*s, d.i = c, end
			return true
		}
	}
	return d.optString(s)
}

// action decodes the i-th action object and applies fromWire.
func (d *fastDecoder) action(i int) (Action, bool) {
	d.i = jsonvalue.SkipSpace(d.b, d.i)
	start := d.i
	if d.b[start] != '{' {
		return Action{}, false
	}
	var w actionWire
	var unknown []string
	ok := d.object(actionMembers, &unknown, func(key string) bool {
		switch key {
		case "id":
			return d.name(&w.ID)
		case "type":
			return d.enum(&w.Type)
		case "tool":
			return d.name(&w.Tool)
		case "parameters":
			return d.optObject(&w.Parameters)
		case "expected_effects":
			return d.optObject(&w.ExpectedEffects)
		case "metadata":
			return d.optObject(&w.Metadata)
		case "state_dependencies":
			return d.strings(&w.StateDependencies)
		case "dependencies":
			return d.strings(&w.Dependencies)
		case "read_set":
			return d.strings(&w.ReadSet)
		case "write_set":
			return d.strings(&w.WriteSet)
		case "await":
			return d.strings(&w.Await)
		case "invocation_mode":
			var mode *string
			if !d.enum(&mode) {
				return false
			}
			if mode != nil {
				w.InvocationMode = *mode
			}
			return true
		case "reversibility":
			return d.enum(&w.Reversibility)
		case "failure_behavior":
			return d.enum(&w.FailureBehavior)
		case "idempotent":
			return d.optBool(&w.Idempotent)
		case "max_retries":
			var n *uint64
			if !d.optUint(&n, 32) {
				return false
			}
			if n != nil {
				w.MaxRetries = new(uint32(*n))
			}
			return true
		case "timeout_ms":
			return d.optUint(&w.TimeoutMs, 64)
		}
		return false // preconditions, assumptions, compensation
	})
	if !ok || (d.deep && jsonvalue.Depth(d.b[start:d.i]) > MaxActionDepth) {
		return Action{}, false
	}
	a, err := fromWire(&w)
	for _, name := range unknown {
		d.warnings.add(actionWhere(i, a.ID), name, actionMembers)
	}
	return a, err == nil
}

// object walks an object's members, calling member with each known name
// once, positioned at its value, which member consumes; other members are
// skipped, their names added to unknown. It fails on a repeated known
// member and on a name that only a case-insensitive or escaped match would
// make known.
func (d *fastDecoder) object(known []string, unknown *[]string, member func(key string) bool) bool {
	d.i = jsonvalue.SkipSpace(d.b, d.i+1)
	if d.b[d.i] == '}' {
		d.i++
		return true
	}
	var seen uint64
	for {
		keyStart := d.i + 1
		d.i = jsonvalue.SkipString(d.b, d.i)
		key := d.b[keyStart : d.i-1]
		d.i = jsonvalue.SkipSpace(d.b, d.i)
		d.i = jsonvalue.SkipSpace(d.b, d.i+1) // past the colon
		k := -1
		for n, name := range known {
			if string(key) == name {
				k = n
				break
			}
		}
		switch {
		case k >= 0:
			if seen&(1<<k) != 0 || !member(known[k]) {
				return false
			}
			seen |= 1 << k
		case strings.IndexByte(string(key), '\\') >= 0 || foldsToKnown(key, known):
			return false
		default:
			if unknown != nil {
				*unknown = append(*unknown, string(key))
			}
			d.i = jsonvalue.SkipValue(d.b, d.i)
		}
		d.i = jsonvalue.SkipSpace(d.b, d.i)
		if d.b[d.i] == '}' {
			d.i++
			return true
		}
		d.i = jsonvalue.SkipSpace(d.b, d.i+1) // past the comma
	}
}

func foldsToKnown(key []byte, known []string) bool {
	for _, name := range known {
		if strings.EqualFold(string(key), name) {
			return true
		}
	}
	return false
}

// array walks an array, calling elem positioned at each element.
func (d *fastDecoder) array(elem func() bool) bool {
	if d.b[d.i] != '[' {
		return false
	}
	d.i = jsonvalue.SkipSpace(d.b, d.i+1)
	if d.b[d.i] == ']' {
		d.i++
		return true
	}
	for {
		if !elem() {
			return false
		}
		d.i = jsonvalue.SkipSpace(d.b, d.i)
		if d.b[d.i] == ']' {
			d.i++
			return true
		}
		d.i = jsonvalue.SkipSpace(d.b, d.i+1)
	}
}

// count is the number of elements of the array at the cursor.
func (d *fastDecoder) count() int {
	if d.b[d.i] != '[' {
		return 0
	}
	n, i := 0, jsonvalue.SkipSpace(d.b, d.i+1)
	for d.b[i] != ']' {
		n++
		i = jsonvalue.SkipSpace(d.b, jsonvalue.SkipValue(d.b, i))
		if d.b[i] == ',' {
			i = jsonvalue.SkipSpace(d.b, i+1)
		}
	}
	return n
}

// null consumes a null.
func (d *fastDecoder) null() bool {
	if d.b[d.i] == 'n' {
		d.i += 4
		return true
	}
	return false
}

// plainString reads a string into a string field (null leaves it).
func (d *fastDecoder) plainString(s *string) bool {
	if d.null() {
		return true
	}
	if d.b[d.i] != '"' {
		return false
	}
	*s, d.i = parseString(d.b, d.i)
	return true
}

// optString reads a string into a *string field (null sets it to nil).
func (d *fastDecoder) optString(s **string) bool {
	if d.null() {
		*s = nil
		return true
	}
	if d.b[d.i] != '"' {
		return false
	}
	var v string
	v, d.i = parseString(d.b, d.i)
	*s = &v
	return true
}

func (d *fastDecoder) optBool(b **bool) bool {
	switch d.b[d.i] {
	case 'n':
		d.i += 4
		*b = nil
	case 't':
		d.i += 4
		*b = new(true)
	case 'f':
		d.i += 5
		*b = new(false)
	default:
		return false
	}
	return true
}

// optUint reads an unsigned integer of at most bits bits.
func (d *fastDecoder) optUint(n **uint64, bits int) bool {
	tok, ok := d.number()
	if !ok {
		return false
	}
	if tok == nil { // null
		*n = nil
		return true
	}
	v, err := strconv.ParseUint(string(tok), 10, bits)
	if err != nil {
		return false
	}
	*n = &v
	return true
}

// optObject reads an object into a map[string]any field (null sets nil).
func (d *fastDecoder) optObject(m *map[string]any) bool {
	if d.null() {
		*m = nil
		return true
	}
	if d.b[d.i] != '{' {
		return false
	}
	if d.names == nil {
		d.names = map[string]string{}
	}
	p := valueParser{keys: d.names, floats: d.floats}
	var v any
	v, d.i = p.parse(d.b, d.i)
	*m = v.(map[string]any)
	return !p.bad
}

// strings reads an array of strings (null sets nil; a null element is "").
func (d *fastDecoder) strings(out *[]string) bool {
	if d.null() {
		*out = nil
		return true
	}
	list := []string{}
	ok := d.array(func() bool {
		var s string
		if !d.name(&s) {
			return false
		}
		list = append(list, s)
		return true
	})
	*out = list
	return ok
}
