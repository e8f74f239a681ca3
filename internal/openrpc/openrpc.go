// Package openrpc builds the OpenRPC document of the daemon's JSON-RPC
// surface from protocol.Methods and protocol.ServerMethods, reflecting the
// params and result types into JSON Schema. openrpc.json at the repository
// root is its output (make openrpc); rpc.discover serves it.
package openrpc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"

	"github.com/invopop/jsonschema"

	"github.com/parslee-ai/car-server/protocol"
)

// Version is the OpenRPC specification version the document follows.
const Version = "1.3.2"

// ServerToClient is the extension that carries the server → client requests
// and notifications, which OpenRPC has no place for.
const ServerToClient = "x-server-to-client"

// document is an OpenRPC document, its members in the specification's order.
type document struct {
	OpenRPC        string     `json:"openrpc"`
	Info           info       `json:"info"`
	Methods        []method   `json:"methods"`
	Components     components `json:"components"`
	ServerToClient []method   `json:"x-server-to-client"`
}

type info struct {
	Title       string `json:"title"`
	Description string `json:"description"`
	Version     string `json:"version"`
}

type method struct {
	Name           string              `json:"name"`
	Summary        string              `json:"summary,omitempty"`
	ParamStructure string              `json:"paramStructure,omitempty"`
	Params         []contentDescriptor `json:"params"`
	Result         *contentDescriptor  `json:"result,omitempty"`
	Errors         []errorObject       `json:"errors,omitempty"`
	// ParamsArray says the params value is the array the one param
	// describes, not an array of positional params.
	ParamsArray bool `json:"x-params-array,omitempty"`
	// Notification says the receiver sends no reply.
	Notification bool `json:"x-notification,omitempty"`
	// ParamsSchema is the params object as one named schema, for a client
	// that implements a server → client method.
	ParamsSchema *jsonschema.Schema `json:"x-params-schema,omitempty"`
}

type contentDescriptor struct {
	Name     string             `json:"name"`
	Required bool               `json:"required,omitempty"`
	Schema   *jsonschema.Schema `json:"schema"`
}

type errorObject struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type components struct {
	Schemas map[string]*jsonschema.Schema `json:"schemas"`
}

// commonErrors may be answered by every method.
var commonErrors = []int{protocol.CodeInvalidParams, protocol.CodeInternal, protocol.CodeHandlerDeadline}

var (
	built     []byte
	buildErr  error
	buildOnce sync.Once
)

// Document returns the OpenRPC document as indented JSON, built once.
func Document() ([]byte, error) {
	buildOnce.Do(func() { built, buildErr = build() })
	return built, buildErr
}

// build reflects the method tables into a document.
func build() ([]byte, error) {
	g := &generator{defs: map[string]*jsonschema.Schema{}}
	doc := document{
		OpenRPC: Version,
		Info: info{
			Title: "car-server",
			Description: "JSON-RPC 2.0 over WebSocket. The first request is session.auth when auth is on; server.handshake follows it before any other method (-32005 otherwise). " +
				"x-server-to-client lists the requests and notifications the daemon sends to a client.",
			Version: strconv.Itoa(protocol.ProtocolVersion),
		},
	}
	var err error
	if doc.Methods, err = g.methods(afterHandshake(protocol.Methods)); err != nil {
		return nil, err
	}
	if doc.ServerToClient, err = g.methods(protocol.ServerMethods); err != nil {
		return nil, err
	}
	// A client implements these: each params type is a named component too.
	for i, s := range protocol.ServerMethods {
		doc.ServerToClient[i].ParamsSchema = g.schema(reflect.TypeOf(s.Params))
	}
	doc.Components.Schemas = g.defs
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode the OpenRPC document: %w", err)
	}
	out = bytes.ReplaceAll(out, []byte(`"#/$defs/`), []byte(`"#/components/schemas/`))
	return append(out, '\n'), nil
}

// afterHandshake adds -32005 to every client method served only after
// server.handshake.
func afterHandshake(specs []protocol.MethodSpec) []protocol.MethodSpec {
	out := slices.Clone(specs)
	for i, s := range out {
		if s.Result != nil && !protocol.BeforeHandshake[s.Name] {
			out[i].Errors = append(slices.Clone(s.Errors), protocol.CodeHandshakeMissing)
		}
	}
	return out
}

// generator reflects types and gathers their definitions.
type generator struct {
	defs map[string]*jsonschema.Schema
}

func (g *generator) methods(specs []protocol.MethodSpec) ([]method, error) {
	out := make([]method, 0, len(specs))
	seen := map[string]bool{}
	for _, s := range specs {
		if seen[s.Name] {
			return nil, fmt.Errorf("method %s is listed twice in the protocol tables", s.Name)
		}
		seen[s.Name] = true
		m, err := g.method(s)
		if err != nil {
			return nil, fmt.Errorf("method %s: %w", s.Name, err)
		}
		out = append(out, m)
	}
	return out, nil
}

func (g *generator) method(s protocol.MethodSpec) (method, error) {
	m := method{Name: s.Name, Summary: s.Summary, Params: []contentDescriptor{}}
	if s.Params != nil {
		params, byName, err := g.params(reflect.TypeOf(s.Params))
		if err != nil {
			return m, err
		}
		m.Params = params
		m.ParamStructure = "by-name"
		if !byName {
			m.ParamStructure, m.ParamsArray = "by-position", true
		}
	}
	if s.Result == nil {
		m.Notification = true
	} else {
		m.Result = &contentDescriptor{Name: "result", Schema: g.result(reflect.TypeOf(s.Result))}
		codes := slices.Concat(s.Errors, commonErrors)
		slices.Sort(codes)
		for _, c := range slices.Compact(codes) {
			m.Errors = append(m.Errors, errorObject{Code: c, Message: protocol.ErrorMessages[c]})
		}
	}
	return m, nil
}

// params turns a params type into content descriptors: one per member of
// a struct (by name), or one for a slice, which is the params array itself.
func (g *generator) params(t reflect.Type) ([]contentDescriptor, bool, error) {
	switch t.Kind() {
	case reflect.Slice:
		return []contentDescriptor{{Name: "items", Required: true, Schema: g.schema(t)}}, false, nil
	case reflect.Map:
		return []contentDescriptor{}, true, nil
	case reflect.Struct:
	default:
		return nil, false, fmt.Errorf("params type %s is neither a struct nor a slice", t)
	}
	obj := g.reflector(true).ReflectFromType(t)
	g.keep(obj)
	required := map[string]bool{}
	for _, name := range obj.Required {
		required[name] = true
	}
	var out []contentDescriptor
	for p := obj.Properties.Oldest(); p != nil; p = p.Next() {
		out = append(out, contentDescriptor{Name: p.Key, Required: required[p.Key], Schema: p.Value})
	}
	return out, true, nil
}

// result reflects a result type: protocol.Null is null, and a pointer is
// its element type or null.
func (g *generator) result(t reflect.Type) *jsonschema.Schema {
	switch {
	case t == reflect.TypeFor[protocol.Null]():
		return &jsonschema.Schema{Type: "null"}
	case t.Kind() == reflect.Pointer:
		return &jsonschema.Schema{OneOf: []*jsonschema.Schema{g.schema(t.Elem()), {Type: "null"}}}
	}
	return g.schema(t)
}

// schema reflects t; named structs become references into the components.
func (g *generator) schema(t reflect.Type) *jsonschema.Schema {
	if t == reflect.TypeFor[json.RawMessage]() {
		return &jsonschema.Schema{Description: "any JSON value"}
	}
	s := g.reflector(false).ReflectFromType(t)
	g.keep(s)
	return s
}

// keep moves s's definitions into the components.
func (g *generator) keep(s *jsonschema.Schema) {
	for name, d := range s.Definitions {
		if d.Title == "" { // generators name their types after it
			d.Title = name
		}
		cutSelfRefs(d, "#/$defs/"+name, name)
		g.defs[name] = d
	}
	s.Definitions = nil
	s.Version = ""
	s.ID = ""
}

func (g *generator) reflector(expanded bool) *jsonschema.Reflector {
	return &jsonschema.Reflector{
		ExpandedStruct: expanded,
		// Members without omitempty are always sent, so they are required.
		RequiredFromJSONSchemaTags: false,
		// The document names every member the daemon sends and reads.
		AllowAdditionalProperties: false,
	}
}

// cutSelfRefs replaces the references a definition makes to itself (a
// recursive type: GoalCondition's conditions) with an open object that
// names the type: code generators that resolve every reference (the
// TypeScript example's) never finish on a cycle.
func cutSelfRefs(s *jsonschema.Schema, ref, name string) {
	if s == nil {
		return
	}
	if s.Items != nil && s.Items.Ref == ref {
		s.Items = &jsonschema.Schema{Type: "object", Description: "a " + name + " (nested)"}
	}
	cutSelfRefs(s.Items, ref, name)
	if s.Properties != nil {
		for p := s.Properties.Oldest(); p != nil; p = p.Next() {
			if p.Value.Ref == ref {
				p.Value = &jsonschema.Schema{Type: "object", Description: "a " + name + " (nested)"}
				s.Properties.Set(p.Key, p.Value)
			}
			cutSelfRefs(p.Value, ref, name)
		}
	}
}
