package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/parslee-ai/car-server/internal/messaging"
	"github.com/parslee-ai/car-server/internal/store"
)

// sendMessage runs the built-in messaging.send: parse, dedup by
// idempotency_key (scoped to the submitting principal and the tenant)
// against the durable ledger, deliver through the submitting
// connection's messaging.channel_send callback, record the key. The receipt
// is the action's output.
func (rt *Runtime) sendMessage(ctx context.Context, sub *Submission, call ToolCall) (any, error) {
	msg, err := messaging.ParseParams(call.Parameters)
	if err != nil {
		// Its messages may quote the wrong value ('kind', a non-string
		// field): the caller gets them whole, the event log does not.
		return nil, &valueError{full: err.Error(), redacted: "messaging.send: its parameters do not have the verb's shape (the caller's reply says which; values are withheld from the event log)"}
	}
	var key string
	if msg.IdempotencyKey != "" {
		if rt.opts.Messages == nil {
			return nil, errors.New("messaging.send: idempotency_key needs the daemon's message ledger, which is not configured")
		}
		key = messaging.ScopedKey(sub.Agent, sub.Tenant, msg.IdempotencyKey)
		prev, ok, err := rt.opts.Messages.Delivered(ctx, key)
		if err == nil && !ok && sub.Agent == "" {
			// A delivery an older daemon recorded belongs to the plain
			// principal, under the key it had then.
			prev, ok, err = rt.opts.Messages.Delivered(ctx, messaging.Key(sub.Tenant, msg.IdempotencyKey))
		}
		if err != nil {
			return nil, store.Wrap("messaging.send: the message was not sent: its idempotency_key could not be checked", err)
		}
		if ok {
			receipt := messaging.Receipt{Channel: prev.Channel, MessageID: prev.MessageID, Deduplicated: true, Reason: "already delivered under this idempotency_key; not sent again"}
			return receiptValue(receipt), nil
		}
	}
	if sub.Session.Executor == nil {
		return nil, errors.New("messaging.send: this session has no way to deliver messages")
	}
	call.Tool = messaging.DeliveryTool
	call.Parameters = msg.DeliveryParams()
	out, err := sub.Session.Executor.ExecuteTool(ctx, call)
	if err != nil {
		if strings.HasPrefix(strings.ToLower(err.Error()), "unknown tool") {
			return nil, fmt.Errorf("messaging.send: this client does not deliver messages: it answered 'unknown tool' to %s; a client delivers a message by handling that tools.execute callback", messaging.DeliveryTool)
		}
		return nil, err
	}
	receipt := messaging.Receipt{Channel: msg.Channel, Delivered: true}
	if m, ok := out.(map[string]any); ok {
		if id, ok := m["message_id"].(string); ok && id != "" {
			receipt.MessageID = &id
		}
	}
	if key != "" {
		if err := rt.opts.Messages.Record(context.WithoutCancel(ctx), key, store.Receipt{Channel: receipt.Channel, MessageID: receipt.MessageID}); err != nil {
			return nil, store.Wrap("messaging.send: the message was delivered, but its idempotency_key could not be recorded, so a repeat may send it again", err)
		}
	}
	return receiptValue(receipt), nil
}

// receiptValue turns a receipt into a JSON value, so references like
// $a1.output.message_id can walk it.
func receiptValue(r messaging.Receipt) any {
	b, _ := json.Marshal(r)
	var v map[string]any
	_ = json.Unmarshal(b, &v)
	return v
}
