package openrpc

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestCheckedInDocumentIsCurrent fails when openrpc.json no longer matches
// the protocol tables it is generated from.
func TestCheckedInDocumentIsCurrent(t *testing.T) {
	doc, err := Document()
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := os.ReadFile(filepath.Join("..", "..", "openrpc.json"))
	if err != nil {
		t.Fatalf("read the checked-in document: %v (make openrpc writes it)", err)
	}
	if !bytes.Equal(doc, onDisk) {
		t.Fatal("openrpc.json is stale: the protocol tables changed since it was generated; run make openrpc and commit it")
	}
}

// TestDocumentIsValidOpenRPC validates the document against the vendored
// OpenRPC meta-schema.
func TestDocumentIsValidOpenRPC(t *testing.T) {
	doc, err := Document()
	if err != nil {
		t.Fatal(err)
	}
	sch := metaSchema(t)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Fatalf("openrpc.json is not a valid OpenRPC document: %v", err)
	}
}

// TestMetaSchemaRejectsAnInvalidDocument shows the validation can fail: a
// method without a name is refused.
func TestMetaSchemaRejectsAnInvalidDocument(t *testing.T) {
	doc, err := Document()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	delete(m["methods"].([]any)[0].(map[string]any), "name")
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if err := metaSchema(t).Validate(inst); err == nil {
		t.Fatal("a method without a name passed the meta-schema")
	}
}

// metaSchema compiles the vendored meta-schema. The JSON Schema objects it
// references (https://meta.json-schema.tools) are read as draft-07, the
// draft that schema describes; its one named definition the meta-schema
// points into, JSONSchemaObject's $ref, is a URI reference.
func metaSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "meta-schema", "schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	const draft7 = "http://json-schema.org/draft-07/schema#"
	text := strings.Replace(string(raw), `"$schema": "https://meta.json-schema.tools/"`, `"$schema": "`+draft7+`"`, 1)
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	jsonSchemaMeta := map[string]any{
		"$schema": draft7,
		"$ref":    draft7,
		"definitions": map[string]any{"JSONSchemaObject": map[string]any{"properties": map[string]any{
			"$ref": map[string]any{"type": "string", "format": "uri-reference"},
		}}},
	}
	c := jsonschema.NewCompiler()
	for _, url := range []string{"https://meta.json-schema.tools", "https://meta.json-schema.tools/"} {
		if err := c.AddResource(url, jsonSchemaMeta); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.AddResource("https://meta.open-rpc.org/", v); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("https://meta.open-rpc.org/")
	if err != nil {
		t.Fatalf("compile the meta-schema: %v", err)
	}
	return sch
}
