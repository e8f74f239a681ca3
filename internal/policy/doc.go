// Package policy holds the rules that decide whether an action may run: the
// rules clients register (deny_tool, deny_tool_param, require_state), the
// operator's declarative rules loaded from TOML files, and the Engine that
// evaluates an action against a set of them.
//
// An Engine collects every violation, never just the first. Violation
// messages name the rule and the parameter, never the value that matched:
// the matched text is what such a rule exists to keep out of logs.
// This package does no I/O beyond reading rule files, and knows nothing of
// connections or the executor.
package policy
