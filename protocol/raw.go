package protocol

import "encoding/json"

// Raw is a T left as the client sent it, so that the daemon decodes it
// itself (DecodeProposal for an ActionProposal) and words its own errors.
// It marshals and unmarshals as json.RawMessage does; the OpenRPC document
// describes it as a T.
type Raw[T any] json.RawMessage

// MarshalJSON returns r, or null when r is nil.
func (r Raw[T]) MarshalJSON() ([]byte, error) {
	return json.RawMessage(r).MarshalJSON()
}

// UnmarshalJSON keeps a copy of data.
func (r *Raw[T]) UnmarshalJSON(data []byte) error {
	return (*json.RawMessage)(r).UnmarshalJSON(data)
}

// JSONSchemaAlias names the type the OpenRPC generator describes r as.
func (Raw[T]) JSONSchemaAlias() any {
	var v T
	return v
}
