package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/parslee-ai/car-server/protocol"
)

// doublingSchema is the hostile schema of the issue: n $defs, each an allOf
// of two $refs to the next, so that one value is checked 2^n times.
func doublingSchema(n int) json.RawMessage {
	var b strings.Builder
	b.WriteString(`{"$ref":"#/$defs/d0","$defs":{`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		if i == n-1 {
			fmt.Fprintf(&b, `"d%d":{"type":"object"}`, i)
			continue
		}
		fmt.Fprintf(&b, `"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i+1, i+1)
	}
	b.WriteString(`}}`)
	return json.RawMessage(b.String())
}

func register(t *testing.T, l SchemaLimits, name string, params string) (*Tool, error) {
	t.Helper()
	r := NewToolRegistry(0, l)
	if _, err := r.Register([]protocol.ToolSchema{{Name: name, Parameters: json.RawMessage(params)}}); err != nil {
		return nil, err
	}
	tool, _ := r.Lookup(name)
	return tool, nil
}

func TestADoublingSchemaIsRefusedAtRegistration(t *testing.T) {
	raw := doublingSchema(22)
	if len(raw) > 2048 {
		t.Fatalf("the hostile schema is %d bytes; the point is that it is small", len(raw))
	}
	_, err := register(t, SchemaLimits{}, "hostile", string(raw))
	if err == nil || !strings.Contains(err.Error(), "max_schema_expansion") || !strings.Contains(err.Error(), "tool 'hostile'") {
		t.Fatalf("a 2^22 expansion: %v", err)
	}
	// Seven levels (a few hundred checks per value) are within the default.
	if _, err := register(t, SchemaLimits{}, "fine", string(doublingSchema(7))); err != nil {
		t.Fatalf("seven levels: %v", err)
	}
}

func TestSchemaBoundsNameTheirSetting(t *testing.T) {
	deep := `{"$ref":"#/$defs/d0","$defs":{`
	for i := 0; i < 40; i++ {
		deep += fmt.Sprintf(`"d%d":{"$ref":"#/$defs/d%d"},`, i, i+1)
	}
	deep += `"d40":{"type":"string"}}}`
	many := `{"properties":{`
	for i := 0; i < 200; i++ {
		if i > 0 {
			many += ","
		}
		many += fmt.Sprintf(`"p%d":{"type":"string"}`, i)
	}
	many += `}}`
	for _, c := range []struct {
		name, schema, want string
		limits             SchemaLimits
	}{
		{"too big", `{"description":"` + strings.Repeat("x", 300) + `"}`, "max_schema_bytes", SchemaLimits{MaxBytes: 256}},
		{"too many keywords", many, "max_schema_keywords", SchemaLimits{MaxKeywords: 100}},
		{"refs too deep", deep, "max_schema_ref_depth", SchemaLimits{}},
		{"in-place cycle", `{"$ref":"#/$defs/a","$defs":{"a":{"allOf":[{"$ref":"#/$defs/b"}]},"b":{"$ref":"#/$defs/a"}}}`, "refers back to itself", SchemaLimits{}},
		{"dynamic ref", `{"$dynamicAnchor":"n","properties":{"x":{"$dynamicRef":"#n"}}}`, "$dynamicRef", SchemaLimits{}},
	} {
		if _, err := register(t, c.limits, "t", c.schema); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error naming %s", c.name, err, c.want)
		}
	}
}

// A recursive schema is legitimate: stepping into members bounds it by the
// value's own size.
func TestRecursiveSchemasRegisterAndValidate(t *testing.T) {
	tree := `{"$ref":"#/$defs/node","$defs":{"node":{"type":"object","required":["name"],"properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}}}}}`
	value := `{"$ref":"#/$defs/v","$defs":{"v":{"anyOf":[{"type":"string"},{"type":"number"},{"type":"object","additionalProperties":{"$ref":"#/$defs/v"}},{"type":"array","items":{"$ref":"#/$defs/v"}}]}}}`
	for _, schema := range []string{tree, value} {
		tool, err := register(t, SchemaLimits{}, "t", schema)
		if err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		ok := map[string]any{"name": "root", "children": []any{map[string]any{"name": "a", "children": []any{}}}}
		if err := tool.ValidateParams(context.Background(), ok); err != nil {
			t.Fatalf("a small tree against %s: %v", schema, err)
		}
	}
	tool, _ := register(t, SchemaLimits{}, "t", tree)
	if err := tool.ValidateParams(context.Background(), map[string]any{"children": []any{}}); err == nil || !strings.Contains(err.Error(), "name") {
		t.Fatalf("a node without its name: %v", err)
	}
}

// nested is {"a": {"a": … 1 …}}, depth deep.
func nested(depth int) any {
	var v any = 1.0
	for i := 0; i < depth; i++ {
		v = map[string]any{"a": v}
	}
	return v
}

// A schema that doubles per level of the value, not per level of itself,
// passes the registration bounds; its validation is refused before it runs.
func TestValidationPastItsBudgetIsRefusedBeforeItRuns(t *testing.T) {
	schema := `{"$ref":"#/$defs/r","$defs":{"r":{"anyOf":[{"properties":{"a":{"$ref":"#/$defs/r"}}},{"properties":{"a":{"$ref":"#/$defs/r"}}}]}}}`
	tool, err := register(t, SchemaLimits{}, "twice", schema)
	if err != nil {
		t.Fatal(err)
	}
	if err := tool.ValidateParams(context.Background(), nested(5)); err != nil {
		t.Fatalf("depth 5 (about 2^6 checks): %v", err)
	}
	// 2^40 checks: the validator itself would run for days.
	err = tool.ValidateParams(context.Background(), nested(40))
	if err == nil || !strings.Contains(err.Error(), "max_schema_evaluations") || !strings.Contains(err.Error(), "tool 'twice'") {
		t.Fatalf("depth 40: %v", err)
	}
	// The walk that refused it stopped at the budget.
	w := costWalk{ctx: context.Background(), budget: 1000}
	if err := w.eval(tool.validator, nested(40)); !errors.Is(err, errOverBudget) || w.spent != 1001 {
		t.Fatalf("the walk: %v after %d checks", err, w.spent)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := tool.ValidateParams(ctx, nested(40)); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled proposal's validation: %v", err)
	}
}

// The walk counts at least what the validator does: a counter of the
// validator's own subschema checks never passes it.
func TestTheCostWalkBoundsTheValidator(t *testing.T) {
	for _, c := range []struct{ schema, value string }{
		{`{"type":"object","properties":{"a":{"type":"string"},"b":{"items":{"type":"integer"}}},"additionalProperties":{"type":"boolean"}}`, `{"a":"x","b":[1,2,3],"c":true,"d":false}`},
		{`{"anyOf":[{"type":"string"},{"type":"object","patternProperties":{"^x":{"type":"number"}}}],"allOf":[{"not":{"type":"null"}}]}`, `{"x1":1,"x2":2,"y":3}`},
		{`{"prefixItems":[{"type":"string"}],"items":{"type":"number"},"contains":{"const":2}}`, `["a",1,2,3]`},
		{`{"if":{"required":["k"]},"then":{"properties":{"k":{"minimum":3}}},"else":{"maxProperties":1}}`, `{"k":4}`},
	} {
		tool, err := register(t, SchemaLimits{}, "t", c.schema)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal([]byte(c.value), &v); err != nil {
			t.Fatal(err)
		}
		w := costWalk{ctx: context.Background(), budget: 1 << 20}
		if err := w.eval(tool.validator, v); err != nil {
			t.Fatal(err)
		}
		if got := countedChecks(t, c.schema, v); got == 0 || got > w.spent {
			t.Errorf("%s on %s: the validator made %d checks, the walk counted %d", c.schema, c.value, got, w.spent)
		}
	}
}

// checkCounter is a vocabulary whose keyword is every schema object: its
// Validate runs once for each subschema check that reaches the end of the
// validator's checks (the ones that fail early are not counted, so this is
// a lower bound of the validator's work).
type checkCounter struct{ n *uint64 }

func (c checkCounter) Validate(*jsonschema.ValidatorContext, any) { *c.n++ }

func countedChecks(t *testing.T, schema string, v any) uint64 {
	t.Helper()
	var n uint64
	meta, err := jsonschema.UnmarshalJSON(strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	mc := jsonschema.NewCompiler()
	if err := mc.AddResource("car:///counter-meta.json", meta); err != nil {
		t.Fatal(err)
	}
	metaSchema, err := mc.Compile("car:///counter-meta.json")
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.RegisterVocabulary(&jsonschema.Vocabulary{
		URL:    "car:///counter",
		Schema: metaSchema,
		Compile: func(*jsonschema.CompilerContext, map[string]any) (jsonschema.SchemaExt, error) {
			return checkCounter{&n}, nil
		},
	})
	c.AssertVocabs()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("car:///counted.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("car:///counted.json")
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Validate(v)
	return n
}

// BenchmarkSchemaRegistration compares refusing the doubling schema with
// registering a plain schema of the same size, in the same run.
func BenchmarkSchemaRegistration(b *testing.B) {
	hostile := doublingSchema(22)
	plain := `{"type":"object","properties":{` + strings.Repeat(`"p":{"type":"string","maxLength":10},`, len(hostile)/36) + `"q":{}}}`
	for _, c := range []struct {
		name, schema string
		refused      bool
	}{{"plain", plain, false}, {"doubling-22", string(hostile), true}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				_, err := NewToolRegistry(0, SchemaLimits{}).Register([]protocol.ToolSchema{{Name: "t", Parameters: json.RawMessage(c.schema)}})
				if (err != nil) != c.refused {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkValidationBudget is what validating one action's parameters
// costs with and without the walk that bounds it, on a plain schema.
func BenchmarkValidationBudget(b *testing.B) {
	schema := `{"type":"object","required":["path"],"properties":{"path":{"type":"string"},"mode":{"enum":["r","w"]},"tags":{"type":"array","items":{"type":"string"}}}}`
	r := NewToolRegistry(0, SchemaLimits{})
	if _, err := r.Register([]protocol.ToolSchema{{Name: "t", Parameters: json.RawMessage(schema)}}); err != nil {
		b.Fatal(err)
	}
	tool, _ := r.Lookup("t")
	params := map[string]any{"path": "/tmp/x", "mode": "r", "tags": []any{"a", "b", "c"}}
	b.Run("validator", func(b *testing.B) {
		for b.Loop() {
			if err := tool.validator.Validate(params); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("walk+validator", func(b *testing.B) {
		for b.Loop() {
			if err := tool.ValidateParams(context.Background(), params); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The validator loops over an object's members at every check of it, so a
// wide object checked against many subschemas costs their product: the
// walk counts the members too, and refuses it before it runs.
func TestTheCostWalkCountsMembersAndItems(t *testing.T) {
	tool, err := register(t, SchemaLimits{MaxEvaluations: 500}, "wide", `{"allOf":[{"minProperties":0},{"minItems":0}]}`)
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{}
	arr := make([]any, 300)
	for i := range 300 {
		obj[strconv.Itoa(i)] = 0.0
	}
	for _, v := range []any{obj, arr} {
		err := tool.ValidateParams(context.Background(), v)
		if err == nil || !strings.Contains(err.Error(), "max_schema_evaluations") {
			t.Errorf("3 checks of a value of 300 members or items, budget 500: %v", err)
		}
	}
	w := costWalk{ctx: context.Background(), budget: 1 << 20}
	if err := w.eval(tool.validator, map[string]any{"a": 0.0, "b": 0.0}); err != nil || w.spent != 3+3*2 {
		t.Fatalf("3 checks of an object of 2 members: %v after %d", err, w.spent)
	}
}

// An enum is one keyword however many values it lists, and the validator
// compares the value with each: the walk counts them.
func TestTheCostWalkCountsEnumValues(t *testing.T) {
	values := make([]string, 300)
	for i := range values {
		values[i] = strconv.Quote(strconv.Itoa(i))
	}
	tool, err := register(t, SchemaLimits{MaxEvaluations: 500}, "enum", `{"items":{"enum":[`+strings.Join(values, ",")+`]}}`)
	if err != nil {
		t.Fatal(err)
	}
	err = tool.ValidateParams(context.Background(), []any{"x", "y", "z"})
	if err == nil || !strings.Contains(err.Error(), "max_schema_evaluations") {
		t.Errorf("3 items against an enum of 300 values, budget 500: %v", err)
	}
}
