package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// SchemaLimits bound what a client's JSON Schema may make the daemon do. A
// schema is checked at tools.register against the first four; the fifth
// bounds each validation, before it runs. Zero fields take the defaults.
type SchemaLimits struct {
	MaxBytes       int    // one schema's size (max_schema_bytes)
	MaxKeywords    int    // object members in one schema document (max_schema_keywords)
	MaxRefDepth    int    // $refs one value may pass through in a row (max_schema_ref_depth)
	MaxExpansion   uint64 // subschemas one value is checked against in place (max_schema_expansion)
	MaxEvaluations uint64 // subschema checks one validation may make (max_schema_evaluations)
}

// DefaultSchemaLimits are what a person would pick: far above any tool
// schema seen in practice (the largest MCP server schemas are tens of
// kilobytes and a few hundred subschemas), far below what costs a second.
var DefaultSchemaLimits = SchemaLimits{
	MaxBytes:       256 << 10,
	MaxKeywords:    10_000,
	MaxRefDepth:    32,
	MaxExpansion:   1_000,
	MaxEvaluations: 1_000_000,
}

// withDefaults fills zero fields from DefaultSchemaLimits.
func (l SchemaLimits) withDefaults() SchemaLimits {
	d := DefaultSchemaLimits
	if l.MaxBytes <= 0 {
		l.MaxBytes = d.MaxBytes
	}
	if l.MaxKeywords <= 0 {
		l.MaxKeywords = d.MaxKeywords
	}
	if l.MaxRefDepth <= 0 {
		l.MaxRefDepth = d.MaxRefDepth
	}
	if l.MaxExpansion == 0 {
		l.MaxExpansion = d.MaxExpansion
	}
	if l.MaxEvaluations == 0 {
		l.MaxEvaluations = d.MaxEvaluations
	}
	return l
}

// countKeywords counts the object members of a decoded JSON document,
// stopping once past max.
func countKeywords(doc any, max int) int {
	n := 0
	var walk func(v any)
	walk = func(v any) {
		if n > max {
			return
		}
		switch v := v.(type) {
		case map[string]any:
			n += len(v)
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(doc)
	return n
}

// inPlace calls f with every subschema that applies to the same value as s
// (the applicators that do not step into a member or an item): these are
// what multiply the work of checking one value.
func inPlace(s *jsonschema.Schema, f func(kind string, t *jsonschema.Schema)) {
	if s.Ref != nil {
		f("$ref", s.Ref)
	}
	if s.Not != nil {
		f("not", s.Not)
	}
	for _, t := range s.AllOf {
		f("allOf", t)
	}
	for _, t := range s.AnyOf {
		f("anyOf", t)
	}
	for _, t := range s.OneOf {
		f("oneOf", t)
	}
	for _, t := range []*jsonschema.Schema{s.If, s.Then, s.Else} {
		if t != nil {
			f("if", t)
		}
	}
	for _, t := range s.DependentSchemas {
		f("dependentSchemas", t)
	}
	for _, d := range s.Dependencies {
		if t, ok := d.(*jsonschema.Schema); ok {
			f("dependencies", t)
		}
	}
}

// stepping calls f with every subschema that applies to a member or an
// item of the value s checks.
func stepping(s *jsonschema.Schema, f func(t *jsonschema.Schema)) {
	for _, t := range s.Properties {
		f(t)
	}
	for _, t := range s.PatternProperties {
		f(t)
	}
	if t, ok := s.AdditionalProperties.(*jsonschema.Schema); ok {
		f(t)
	}
	for _, t := range []*jsonschema.Schema{s.PropertyNames, s.UnevaluatedProperties, s.Contains, s.Items2020, s.UnevaluatedItems} {
		if t != nil {
			f(t)
		}
	}
	switch items := s.Items.(type) {
	case *jsonschema.Schema:
		f(items)
	case []*jsonschema.Schema:
		for _, t := range items {
			f(t)
		}
	}
	if t, ok := s.AdditionalItems.(*jsonschema.Schema); ok {
		f(t)
	}
	for _, t := range s.PrefixItems {
		f(t)
	}
}

// shape is what checkShape learns of one subschema.
type shape struct {
	expansion uint64 // subschemas checked in place, itself included (saturating)
	refDepth  int    // the longest run of $refs in place
	state     uint8  // 0 unseen, 1 on the path being walked, 2 done
}

// checkShape refuses a compiled schema whose in-place expansion or $ref
// depth passes the limits, or that the validator could not bound: an
// in-place reference cycle, or a dynamic reference, whose target is only
// known while validating.
func checkShape(root *jsonschema.Schema, l SchemaLimits) error {
	at := func(s *jsonschema.Schema) string {
		if i := strings.IndexByte(s.Location, '#'); i >= 0 {
			return s.Location[i:]
		}
		return "#"
	}
	// Every subschema, reached through either kind of applicator.
	all := []*jsonschema.Schema{root}
	reached := map[*jsonschema.Schema]bool{root: true}
	reach := func(_ string, t *jsonschema.Schema) {
		if !reached[t] {
			reached[t] = true
			all = append(all, t)
		}
	}
	for i := 0; i < len(all); i++ {
		inPlace(all[i], reach)
		stepping(all[i], func(t *jsonschema.Schema) { reach("", t) })
	}
	// Then the in-place graph from each: it must be acyclic, and its path
	// counts and $ref runs bounded.
	seen := make(map[*jsonschema.Schema]*shape, len(all))
	var err error
	var visit func(s *jsonschema.Schema) *shape
	visit = func(s *jsonschema.Schema) *shape {
		if sh, ok := seen[s]; ok {
			if sh.state == 1 && err == nil {
				err = fmt.Errorf("%s refers back to itself without stepping into a member or an item, so no value can ever be checked against it", at(s))
			}
			return sh
		}
		sh := &shape{expansion: 1, state: 1}
		seen[s] = sh
		if (s.RecursiveRef != nil || s.DynamicRef != nil) && err == nil {
			err = fmt.Errorf("%s uses $recursiveRef or $dynamicRef, whose target is only known while validating; use $ref", at(s))
		}
		inPlace(s, func(kind string, t *jsonschema.Schema) {
			if err != nil {
				return
			}
			c := visit(t)
			sh.expansion = satAdd(sh.expansion, c.expansion)
			depth := c.refDepth
			if kind == "$ref" {
				depth++
			}
			sh.refDepth = max(sh.refDepth, depth)
		})
		sh.state = 2
		if err == nil && sh.expansion > l.MaxExpansion {
			err = fmt.Errorf("checking one value against %s means checking it against more than %d subschemas (allOf, anyOf, oneOf and $ref multiply), over max_schema_expansion (%d): flatten the schema, or raise max_schema_expansion", at(s), l.MaxExpansion, l.MaxExpansion)
		}
		if err == nil && sh.refDepth > l.MaxRefDepth {
			err = fmt.Errorf("%s passes through %d $refs in a row, over max_schema_ref_depth (%d)", at(s), sh.refDepth, l.MaxRefDepth)
		}
		return sh
	}
	for _, s := range all {
		if visit(s); err != nil {
			return err
		}
	}
	return nil
}

// satAdd adds two counts (never negative) without passing the largest
// value of their type.
func satAdd[T int64 | uint64](a, b T) T {
	if s := a + b; s >= a {
		return s
	}
	if m := ^T(0); m > 0 {
		return m
	}
	return math.MaxInt64
}

// errOverBudget ends a cost walk that passed its budget.
var errOverBudget = errors.New("over budget")

// costWalk counts the subschema checks validating one value would make,
// and the members and items they loop over, following the validator's own
// traversal, and stops at the budget. It
// counts every applicator as applying (a member against each of its
// object's patternProperties, both then and else), so the count bounds the
// validator's from above; it allocates nothing.
type costWalk struct {
	ctx    context.Context
	budget uint64
	spent  uint64
}

// spend charges n to the budget, and looks at ctx every 4096 or so.
func (w *costWalk) spend(n uint64) error {
	before := w.spent
	w.spent = satAdd(w.spent, n)
	if w.spent > w.budget {
		return errOverBudget
	}
	if before>>12 != w.spent>>12 {
		return w.ctx.Err()
	}
	return nil
}

// eval counts one check of v against s. A check of an object or an array
// also counts one for each of its members or items, and a check against an
// enum one for each of its values: the validator loops
// over an object's members at every check of it, whatever the schema says,
// so a large object checked against many subschemas costs their product.
func (w *costWalk) eval(s *jsonschema.Schema, v any) error {
	if err := w.spend(1); err != nil {
		return err
	}
	if s.Bool != nil {
		return nil
	}
	// enum compares the value with each of its values in turn.
	if s.Enum != nil {
		if err := w.spend(uint64(len(s.Enum.Values))); err != nil {
			return err
		}
	}
	var err error
	inPlace(s, func(_ string, t *jsonschema.Schema) {
		if err == nil {
			err = w.eval(t, v)
		}
	})
	if err != nil {
		return err
	}
	switch v := v.(type) {
	case map[string]any:
		if err := w.spend(uint64(len(v))); err != nil {
			return err
		}
		return w.object(s, v)
	case []any:
		if err := w.spend(uint64(len(v))); err != nil {
			return err
		}
		return w.array(s, v)
	}
	return nil
}

func (w *costWalk) object(s *jsonschema.Schema, obj map[string]any) error {
	additional, _ := s.AdditionalProperties.(*jsonschema.Schema)
	for name, member := range obj {
		if t := s.Properties[name]; t != nil {
			if err := w.eval(t, member); err != nil {
				return err
			}
		}
		for _, t := range s.PatternProperties {
			if err := w.eval(t, member); err != nil {
				return err
			}
		}
		for _, t := range []*jsonschema.Schema{additional, s.UnevaluatedProperties} {
			if t != nil {
				if err := w.eval(t, member); err != nil {
					return err
				}
			}
		}
		if s.PropertyNames != nil {
			if err := w.eval(s.PropertyNames, name); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *costWalk) array(s *jsonschema.Schema, arr []any) error {
	additional, _ := s.AdditionalItems.(*jsonschema.Schema)
	for i, item := range arr {
		var byIndex *jsonschema.Schema
		switch items := s.Items.(type) {
		case *jsonschema.Schema:
			byIndex = items
		case []*jsonschema.Schema:
			if i < len(items) {
				byIndex = items[i]
			} else {
				byIndex = additional
			}
		}
		if i < len(s.PrefixItems) {
			byIndex = s.PrefixItems[i]
		} else if s.Items2020 != nil {
			byIndex = s.Items2020
		}
		for _, t := range []*jsonschema.Schema{byIndex, s.Contains, s.UnevaluatedItems} {
			if t != nil {
				if err := w.eval(t, item); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// validationCost checks that validating v against s makes at most budget
// subschema checks, members and items counted; past it, or when ctx ends, it says so without having
// validated anything.
func validationCost(ctx context.Context, s *jsonschema.Schema, v any, budget uint64) error {
	w := costWalk{ctx: ctx, budget: budget}
	return w.eval(s, v)
}
