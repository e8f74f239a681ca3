package policy

import (
	"fmt"
	"strings"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/protocol"
)

// FromDefinition builds the policy a client registers. It says which field is
// missing or wrong.
func FromDefinition(d protocol.PolicyDefinition) (Policy, error) {
	if strings.TrimSpace(d.Name) == "" {
		return Policy{}, fmt.Errorf("policy field 'name' is required")
	}
	need := func(field, value string) error {
		if value == "" {
			return fmt.Errorf("policy '%s': rule %s needs field '%s'", d.Name, d.Rule, field)
		}
		return nil
	}
	switch d.Rule {
	case "deny_tool":
		if err := need("target", d.Target); err != nil {
			return Policy{}, err
		}
		return Policy{Name: d.Name, Description: fmt.Sprintf("deny tool '%s'", d.Target), Rule: DenyTool{Tool: d.Target}}, nil
	case "deny_connector":
		if err := need("target", d.Target); err != nil {
			return Policy{}, err
		}
		return Policy{Name: d.Name, Description: fmt.Sprintf("deny every tool of connector '%s'", d.Target), Rule: DenyConnector{Slug: d.Target}}, nil
	case "deny_tool_param":
		for _, f := range [][2]string{{"target", d.Target}, {"key", d.Key}, {"pattern", d.Pattern}} {
			if err := need(f[0], f[1]); err != nil {
				return Policy{}, err
			}
		}
		return Policy{
			Name:        d.Name,
			Description: fmt.Sprintf("deny tool '%s' when parameter '%s' contains '%s'", d.Target, d.Key, d.Pattern),
			Rule:        DenyToolParam{Tool: d.Target, Param: d.Key, Contains: d.Pattern},
		}, nil
	case "require_state":
		if err := need("key", d.Key); err != nil {
			return Policy{}, err
		}
		if d.Value == nil {
			return Policy{}, fmt.Errorf("policy '%s': rule require_state needs field 'value' (the JSON value the key must hold)", d.Name)
		}
		return Policy{
			Name:        d.Name,
			Description: fmt.Sprintf("require state '%s' to be %s", d.Key, jsonvalue.Canonical(d.Value)),
			Rule:        RequireState{Key: d.Key, Value: d.Value},
		}, nil
	case "require_claim":
		if err := need("key", d.Key); err != nil {
			return Policy{}, err
		}
		r := RequireClaim{Claim: d.Key, Tool: d.Target, Value: d.Value, HasValue: d.Value != nil}
		desc := fmt.Sprintf("require scope claim '%s'", d.Key)
		if r.HasValue {
			desc += fmt.Sprintf(" = %s", jsonvalue.Canonical(d.Value))
		}
		if d.Target != "" {
			desc += fmt.Sprintf(" for tool '%s'", d.Target)
		}
		return Policy{Name: d.Name, Description: desc, Rule: r}, nil
	case "deny_tool_callback":
		return Policy{}, fmt.Errorf("policy '%s': rule deny_tool_callback is not supported by the daemon; use deny_tool or deny_tool_param", d.Name)
	case "":
		return Policy{}, fmt.Errorf("policy '%s': field 'rule' is required (deny_tool, deny_connector, deny_tool_param, require_state or require_claim)", d.Name)
	}
	return Policy{}, fmt.Errorf("policy '%s': unknown rule '%s' (use deny_tool, deny_connector, deny_tool_param, require_state or require_claim)", d.Name, d.Rule)
}
