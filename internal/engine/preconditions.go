package engine

import (
	"fmt"
	"strings"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/protocol"
)

// checkPrecondition evaluates one precondition against the value at its key.
// An unknown operator fails the check, naming the operators that exist.
func checkPrecondition(pc protocol.Precondition, value any, present bool) error {
	ok := false
	switch pc.Operator {
	case "eq":
		ok = present && jsonvalue.Equal(value, pc.Value)
	case "neq":
		ok = !present || !jsonvalue.Equal(value, pc.Value)
	case "gt", "lt", "gte", "lte":
		a, okA := jsonvalue.ToFloat(value)
		b, okB := jsonvalue.ToFloat(pc.Value)
		if present && okA && okB {
			switch pc.Operator {
			case "gt":
				ok = a > b
			case "lt":
				ok = a < b
			case "gte":
				ok = a >= b
			case "lte":
				ok = a <= b
			}
		}
	case "exists":
		ok = present
	case "not_exists":
		ok = !present
	case "contains":
		switch v := value.(type) {
		case string:
			s, isStr := pc.Value.(string)
			ok = isStr && strings.Contains(v, s)
		case []any:
			for _, e := range v {
				if jsonvalue.Equal(e, pc.Value) {
					ok = true
					break
				}
			}
		}
	default:
		return fmt.Errorf("precondition on '%s': unknown operator '%s' (use eq, neq, gt, lt, gte, lte, exists, not_exists or contains)", pc.Key, pc.Operator)
	}
	if ok {
		return nil
	}
	desc := ""
	if pc.Description != "" {
		desc = " (" + pc.Description + ")"
	}
	if !present {
		return &valueError{
			full:     fmt.Sprintf("precondition failed%s: state key '%s' %s %s, but the key is not set", desc, pc.Key, pc.Operator, jsonvalue.Canonical(pc.Value)),
			redacted: fmt.Sprintf("precondition failed%s: state key '%s' %s (value withheld), but the key is not set", desc, pc.Key, pc.Operator),
		}
	}
	return &valueError{
		full:     fmt.Sprintf("precondition failed%s: state key '%s' is %s, wanted %s %s", desc, pc.Key, jsonvalue.Canonical(value), pc.Operator, jsonvalue.Canonical(pc.Value)),
		redacted: fmt.Sprintf("precondition failed%s: state key '%s' is not %s the wanted value (values withheld)", desc, pc.Key, pc.Operator),
	}
}
