// Package messaging is the messaging.send verb: sending a message to a human
// as a governed built-in tool. The daemon owns the verb — parsing,
// deduplication by idempotency key, the receipt — and the client that
// submitted the proposal owns delivery (the messaging.channel_send callback).
//
// messaging.send flows through the same validator → policy → rate limit →
// event log chain as every other tool. Without a way to deliver, a send is an
// error, never a silent success.
//
// The keys already delivered (Key scopes one to its tenant) are kept by
// the store (store.Messages: a journal in store/file, a table in
// store/postgres); the package never imports the store or the journal.
package messaging

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/parslee-ai/car-server/protocol"
)

// Tool names.
const (
	ToolName     = "messaging.send"         // the verb agents call
	DeliveryTool = "messaging.channel_send" // the callback that delivers it
)

// Recipient kinds.
const (
	KindDirect  = "direct"  // a person
	KindChannel = "channel" // a shared channel
)

// OutboundMessage is one message as parsed from messaging.send parameters.
type OutboundMessage struct {
	Channel        string
	Kind           string // direct or channel
	To             string
	Body           string
	MessageKind    string
	DeadlineMs     *uint64
	IdempotencyKey string
}

// Receipt is what a send reports (the action's output).
type Receipt struct {
	Channel      string  `json:"channel"`
	MessageID    *string `json:"message_id,omitempty"`
	Deduplicated bool    `json:"deduplicated"`
	Delivered    bool    `json:"delivered"`
	Reason       string  `json:"reason,omitempty"`
	Queued       bool    `json:"queued"`
}

// Schema is the advertised schema of messaging.send.
func Schema() protocol.ToolSchema {
	return protocol.ToolSchema{
		Name:        ToolName,
		Description: "Send a message to a person (kind 'direct') or into a shared channel (kind 'channel'), delivered by the client.",
		Parameters: json.RawMessage(`{"type":"object","required":["channel","to","body"],"properties":{` +
			`"channel":{"type":"string","description":"channel name, e.g. slack, teams, imessage"},` +
			`"to":{"type":"string","description":"the handle for direct, the channel id for channel"},` +
			`"kind":{"type":"string","enum":["direct","channel"],"default":"direct"},` +
			`"body":{"type":"string","description":"the message text"},` +
			`"idempotency_key":{"type":"string","description":"a repeat with this key is not sent again"},` +
			`"deadline_ms":{"type":"integer","minimum":0,"description":"absolute Unix-millisecond deadline"},` +
			`"message_kind":{"type":"string"}}}`),
	}
}

// ParseParams reads messaging.send parameters. Every error names the field
// and the accepted shape. `to` is the only spelling of the address: policies
// match literal parameter keys, so an alias would be an ungoverned spelling.
func ParseParams(params any) (OutboundMessage, error) {
	obj, ok := params.(map[string]any)
	if !ok {
		return OutboundMessage{}, fmt.Errorf("messaging.send: parameters must be a JSON object")
	}
	var m OutboundMessage
	var err error
	if m.Channel, err = requiredString(obj, "channel"); err != nil {
		return m, err
	}
	if _, present := obj["to"]; !present {
		return m, fmt.Errorf("messaging.send: missing required parameter 'to' — pass 'to' naming the handle or channel id")
	}
	if m.To, err = requiredString(obj, "to"); err != nil {
		return m, err
	}
	m.Kind = KindDirect // the narrower act: an under-specified call never broadcasts
	switch k := obj["kind"].(type) {
	case nil:
	case string:
		if k != KindDirect && k != KindChannel {
			return m, fmt.Errorf("messaging.send: unknown kind '%s' — expected 'direct' (a person) or 'channel' (a shared channel)", k)
		}
		m.Kind = k
	default:
		return m, fmt.Errorf("messaging.send: 'kind' must be the string 'direct' or 'channel', got %s", jsonText(k))
	}
	if m.Body, err = requiredString(obj, "body"); err != nil {
		return m, err
	}
	switch k := obj["idempotency_key"].(type) {
	case nil:
	case string:
		if strings.TrimSpace(k) == "" {
			return m, fmt.Errorf("messaging.send: 'idempotency_key' must not be blank — omit it entirely to opt out of dedup")
		}
		m.IdempotencyKey = k
	default:
		return m, fmt.Errorf("messaging.send: 'idempotency_key' must be a string, got %s", jsonText(k))
	}
	if v, ok := obj["deadline_ms"]; ok && v != nil {
		n, err := unsigned(v)
		if err != nil {
			return m, fmt.Errorf("messaging.send: 'deadline_ms' must be a Unix-millisecond unsigned integer")
		}
		m.DeadlineMs = &n
	}
	if v, ok := obj["message_kind"]; ok && v != nil {
		if m.MessageKind, err = requiredString(obj, "message_kind"); err != nil {
			return m, err
		}
	}
	return m, nil
}

// requiredString is a present, non-blank string: a blank channel routes
// nowhere, a blank recipient addresses nobody, a blank body pages a human
// with silence.
func requiredString(obj map[string]any, field string) (string, error) {
	switch v := obj[field].(type) {
	case nil:
		return "", fmt.Errorf("messaging.send: missing required parameter '%s'", field)
	case string:
		if strings.TrimSpace(v) == "" {
			return "", fmt.Errorf("messaging.send: '%s' must not be empty", field)
		}
		return v, nil
	default:
		return "", fmt.Errorf("messaging.send: '%s' must be a string, got %s", field, jsonText(v))
	}
}

func unsigned(v any) (uint64, error) {
	var s string
	switch n := v.(type) {
	case json.Number:
		s = n.String()
	case float64:
		if n < 0 || n != float64(uint64(n)) {
			return 0, fmt.Errorf("not an unsigned integer")
		}
		return uint64(n), nil
	default:
		return 0, fmt.Errorf("not a number")
	}
	var out uint64
	if _, err := fmt.Sscanf(s, "%d", &out); err != nil || strings.ContainsAny(s, ".-eE") {
		return 0, fmt.Errorf("not an unsigned integer")
	}
	return out, nil
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// DeliveryParams are the parameters of the messaging.channel_send callback.
func (m OutboundMessage) DeliveryParams() map[string]any {
	return map[string]any{"channel": m.Channel, "kind": m.Kind, "to": m.To, "body": m.Body}
}
