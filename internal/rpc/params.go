package rpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/parslee-ai/car-server/protocol"
)

// decodeParams decodes raw into v. shape describes the expected params for the
// error message ("{key: string, tenant_id?: string}"). Unknown members are
// ignored; a mistyped member is named.
func decodeParams(raw *json.RawMessage, v any, shape string) error {
	if raw == nil || len(bytes.TrimSpace(*raw)) == 0 || string(bytes.TrimSpace(*raw)) == "null" {
		return invalidParams("params are required: expected %s", shape)
	}
	if err := json.Unmarshal(*raw, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if te.Field == "" {
				return invalidParams("params must be %s, got a JSON %s", shape, te.Value)
			}
			return invalidParams("param '%s' must be %s, got a JSON %s (expected %s)", te.Field, protocol.KindName(te.Type.Kind().String()), te.Value, shape)
		}
		return invalidParams("params could not be decoded: %v (expected %s)", err, shape)
	}
	return nil
}

// optionalParams is decodeParams for methods whose params may be omitted.
func optionalParams(raw *json.RawMessage, v any, shape string) error {
	if raw == nil || len(bytes.TrimSpace(*raw)) == 0 || string(bytes.TrimSpace(*raw)) == "null" {
		return nil
	}
	return decodeParams(raw, v, shape)
}

// stringParam decodes params {name: string} and requires the member: the
// params of the methods that name one thing by its id.
func stringParam(raw *json.RawMessage, name string) (string, error) {
	shape := "{" + name + ": string}"
	var m map[string]json.RawMessage
	if err := decodeParams(raw, &m, shape); err != nil {
		return "", err
	}
	var v string
	if r, ok := m[name]; ok && string(r) != "null" {
		if err := json.Unmarshal(r, &v); err != nil {
			return "", invalidParams("param '%s' must be a string (expected %s)", name, shape)
		}
	}
	return v, requireString(name, v, shape)
}

// requireString fails when a required string param is empty.
func requireString(name, value, shape string) error {
	if value == "" {
		return invalidParams("param '%s' is required (a non-empty string): expected %s", name, shape)
	}
	return nil
}

// decodeKnownParams is decodeParams for methods where a misspelt member
// would silently change what is set (a limit left unbounded): a member the
// shape does not name is refused.
func decodeKnownParams(raw *json.RawMessage, v any, shape string) error {
	if err := decodeParams(raw, v, shape); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(*raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalidParams("params: %s; expected %s", strings.TrimPrefix(err.Error(), "json: "), shape)
	}
	return nil
}
