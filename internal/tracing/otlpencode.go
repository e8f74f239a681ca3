package tracing

import (
	"math"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// appendExportRequest appends the OTLP ExportTraceServiceRequest of spans,
// in protobuf, to b: the bytes the SDK's exporter sends for the same spans
// (same messages, fields in the order it writes them), written straight
// from the ended spans instead of through one protobuf object per span,
// attribute and value, which cost the daemon more than the spans did
// (docs/tracing.md, Cost). Spans are grouped by resource, then by
// instrumentation scope, each group in the order it first appears.
func appendExportRequest(b []byte, spans []sdktrace.ReadOnlySpan) []byte {
	var first [1]spanGroup // the daemon has one resource and one scope
	groups := first[:0]
	for _, s := range spans {
		if g := (spanGroup{s.Resource(), s.InstrumentationScope()}); !g.in(groups) {
			groups = append(groups, g)
		}
	}
	for i, g := range groups {
		if resourceIn(g.res, groups[:i]) {
			continue // written with the first scope of its resource
		}
		var rs int
		b, rs = openField(b, 1) // ExportTraceServiceRequest.resource_spans
		if g.res != nil {
			var r int
			b, r = openField(b, 1) // ResourceSpans.resource
			for it := g.res.Iter(); it.Next(); {
				b = appendKeyValue(b, 1, it.Attribute()) // Resource.attributes
			}
			b = closeField(b, r)
		}
		for _, h := range groups[i:] {
			if !sameResource(h.res, g.res) {
				continue
			}
			var ss int
			b, ss = openField(b, 2) // ResourceSpans.scope_spans
			b = appendScope(b, h.scope)
			for _, s := range spans {
				if len(groups) == 1 || h.holds(s) {
					b = appendSpan(b, s)
				}
			}
			b = appendString(b, 3, h.scope.SchemaURL) // ScopeSpans.schema_url
			b = closeField(b, ss)
		}
		if g.res != nil {
			b = appendString(b, 3, g.res.SchemaURL()) // ResourceSpans.schema_url
		}
		b = closeField(b, rs)
	}
	return b
}

// spanGroup is the spans of one resource and instrumentation scope.
type spanGroup struct {
	res   *resource.Resource
	scope instrumentation.Scope
}

func (g spanGroup) holds(s sdktrace.ReadOnlySpan) bool {
	return g.is(spanGroup{s.Resource(), s.InstrumentationScope()})
}

func (g spanGroup) is(h spanGroup) bool { return sameResource(h.res, g.res) && h.scope == g.scope }

func (g spanGroup) in(gs []spanGroup) bool { return slices.ContainsFunc(gs, g.is) }

// resourceIn says whether a group of gs has the resource res.
func resourceIn(res *resource.Resource, gs []spanGroup) bool {
	return slices.ContainsFunc(gs, func(h spanGroup) bool { return sameResource(h.res, res) })
}

// sameResource is the SDK exporter's grouping: resources with equal
// attributes are one.
func sameResource(a, b *resource.Resource) bool {
	return a == b || a.Equivalent() == b.Equivalent()
}

func appendScope(b []byte, sc instrumentation.Scope) []byte {
	if sc == (instrumentation.Scope{}) {
		return b // the SDK's exporter sends no scope message for the zero scope
	}
	b, f := openField(b, 1) // ScopeSpans.scope
	b = appendString(b, 1, sc.Name)
	b = appendString(b, 2, sc.Version)
	for it := sc.Attributes.Iter(); it.Next(); {
		b = appendKeyValue(b, 3, it.Attribute())
	}
	return closeField(b, f)
}

// appendSpan appends one Span message, as ScopeSpans.spans.
func appendSpan(b []byte, s sdktrace.ReadOnlySpan) []byte {
	b, f := openField(b, 2)
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = appendBytes(b, 1, tid[:])
	b = appendBytes(b, 2, sid[:])
	if ts := sc.TraceState(); ts.Len() > 0 {
		b = appendString(b, 3, ts.String())
	}
	parent := s.Parent()
	if psid := parent.SpanID(); psid.IsValid() {
		b = appendBytes(b, 4, psid[:])
	}
	b = appendString(b, 5, s.Name())
	b = appendVarint(b, 6, uint64(spanKind(s.SpanKind())))
	b = appendFixed64(b, 7, unixNano(s.StartTime().UnixNano()))
	b = appendFixed64(b, 8, unixNano(s.EndTime().UnixNano()))
	for _, kv := range s.Attributes() {
		b = appendKeyValue(b, 9, kv)
	}
	b = appendVarint(b, 10, clampUint32(s.DroppedAttributes()))
	for _, e := range s.Events() {
		var ef int
		b, ef = openField(b, 11)
		b = appendFixed64(b, 1, unixNano(e.Time.UnixNano()))
		b = appendString(b, 2, e.Name)
		for _, kv := range e.Attributes {
			b = appendKeyValue(b, 3, kv)
		}
		b = appendVarint(b, 4, clampUint32(e.DroppedAttributeCount))
		b = closeField(b, ef)
	}
	b = appendVarint(b, 12, clampUint32(s.DroppedEvents()))
	for _, l := range s.Links() {
		var lf int
		b, lf = openField(b, 13)
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		b = appendBytes(b, 1, ltid[:])
		b = appendBytes(b, 2, lsid[:])
		for _, kv := range l.Attributes {
			b = appendKeyValue(b, 4, kv)
		}
		b = appendVarint(b, 5, clampUint32(l.DroppedAttributeCount))
		b = appendFixed32(b, 6, spanFlags(l.SpanContext.TraceFlags(), l.SpanContext))
		b = closeField(b, lf)
	}
	b = appendVarint(b, 14, clampUint32(s.DroppedLinks()))
	st := s.Status()
	b, sf := openField(b, 15) // always present, as the SDK's exporter sends it
	b = appendString(b, 2, st.Description)
	b = appendVarint(b, 3, uint64(statusCode(st.Code)))
	b = closeField(b, sf)
	b = appendFixed32(b, 16, spanFlags(sc.TraceFlags(), parent))
	return closeField(b, f)
}

// OTLP's enum values (trace.proto).
const (
	otlpStatusOK    = 1
	otlpStatusError = 2
	// The span-flags bits: the W3C flags, and whether the parent is remote.
	otlpFlagsHasIsRemote = 0x100
	otlpFlagsIsRemote    = 0x200
)

func statusCode(c codes.Code) int {
	switch c {
	case codes.Ok:
		return otlpStatusOK
	case codes.Error:
		return otlpStatusError
	}
	return 0
}

// spanKind is OTLP's SpanKind: the SDK's numbering, unspecified beyond it.
func spanKind(k trace.SpanKind) int {
	if k < trace.SpanKindInternal || k > trace.SpanKindConsumer {
		return 0
	}
	return int(k)
}

func spanFlags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	f := uint32(tf) | otlpFlagsHasIsRemote
	if parent.IsRemote() {
		f |= otlpFlagsIsRemote
	}
	return f
}

func unixNano(n int64) uint64 { return uint64(max(0, n)) }

func clampUint32(v int) uint64 { return uint64(min(max(v, 0), math.MaxUint32)) }

// appendKeyValue appends a KeyValue message as field num. A scalar value's
// sizes are known before it is written; the others are moved to fit.
func appendKeyValue(b []byte, num protowire.Number, kv attribute.KeyValue) []byte {
	v := &kv.Value
	switch v.Type() {
	case attribute.STRING:
		s := v.AsString()
		b = appendKeyValueHead(b, num, kv.Key, 1+sizeLen(len(s)))
		b = append(b, 1<<3|byte(protowire.BytesType))
		b = appendLen(b, len(s))
		return append(b, s...)
	case attribute.BOOL:
		b = appendKeyValueHead(b, num, kv.Key, 2)
		return append(b, 2<<3|byte(protowire.VarintType), byte(protowire.EncodeBool(v.AsBool())))
	case attribute.INT64:
		i := uint64(v.AsInt64())
		b = appendKeyValueHead(b, num, kv.Key, 1+protowire.SizeVarint(i))
		b = append(b, 3<<3|byte(protowire.VarintType))
		return protowire.AppendVarint(b, i)
	case attribute.FLOAT64:
		b = appendKeyValueHead(b, num, kv.Key, 1+8)
		b = append(b, 4<<3|byte(protowire.Fixed64Type))
		return protowire.AppendFixed64(b, math.Float64bits(v.AsFloat64()))
	}
	b, f := openField(b, num)
	b = appendString(b, 1, string(kv.Key))
	b, av := openField(b, 2) // always present, an empty AnyValue for an empty value
	b = appendValue(b, *v)
	b = closeField(b, av)
	return closeField(b, f)
}

// appendKeyValueHead appends a KeyValue's tag and length, its key, and the
// tag and length of its AnyValue of n bytes.
func appendKeyValueHead(b []byte, num protowire.Number, key attribute.Key, n int) []byte {
	size := 1 + sizeLen(n)
	if key != "" {
		size += 1 + sizeLen(len(key))
	}
	b = appendTag(b, num, protowire.BytesType)
	b = appendLen(b, size)
	b = appendString(b, 1, string(key))
	b = append(b, 2<<3|byte(protowire.BytesType))
	return appendLen(b, n)
}

// sizeLen is the size of a length-delimited field's length and content.
func sizeLen(n int) int { return protowire.SizeVarint(uint64(n)) + n }

// appendValue appends the fields of an AnyValue: one of its oneof.
func appendValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.BOOL:
		return append(b, 2<<3|byte(protowire.VarintType), byte(protowire.EncodeBool(v.AsBool())))
	case attribute.INT64:
		b = append(b, 3<<3|byte(protowire.VarintType))
		return protowire.AppendVarint(b, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		b = append(b, 4<<3|byte(protowire.Fixed64Type))
		return protowire.AppendFixed64(b, math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		b = append(b, 1<<3|byte(protowire.BytesType))
		b = appendLen(b, len(v.AsString()))
		return append(b, v.AsString()...)
	case attribute.BYTESLICE:
		b = append(b, 7<<3|byte(protowire.BytesType))
		return protowire.AppendBytes(b, v.AsByteSlice())
	case attribute.BOOLSLICE:
		return appendArray(b, v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return appendArray(b, v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return appendArray(b, v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return appendArray(b, v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		return appendArray(b, v.AsSlice(), func(x attribute.Value) attribute.Value { return x })
	case attribute.MAP:
		b, m := openField(b, 6) // KeyValueList
		for _, kv := range v.AsMap() {
			b = appendKeyValue(b, 1, kv)
		}
		return closeField(b, m)
	case attribute.EMPTY:
		return b
	default:
		b = append(b, 1<<3|byte(protowire.BytesType))
		return protowire.AppendString(b, "INVALID") // as the SDK's exporter says
	}
}

// appendArray appends an AnyValue.array_value of xs, each made a value by
// value.
func appendArray[T any](b []byte, xs []T, value func(T) attribute.Value) []byte {
	b, arr := openField(b, 5)
	for _, x := range xs {
		b = appendArrayItem(b, value(x))
	}
	return closeField(b, arr)
}

// appendArrayItem appends one ArrayValue.values item.
func appendArrayItem(b []byte, v attribute.Value) []byte {
	b, f := openField(b, 1)
	b = appendValue(b, v)
	return closeField(b, f)
}

// Fields, the scalars left out when zero as proto3 does.

func appendTag(b []byte, num protowire.Number, typ protowire.Type) []byte {
	if num < 16 {
		return append(b, byte(num)<<3|byte(typ)) // one byte
	}
	return protowire.AppendTag(b, num, typ)
}

func appendLen(b []byte, n int) []byte {
	if n < 0x80 {
		return append(b, byte(n))
	}
	return protowire.AppendVarint(b, uint64(n))
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = appendTag(b, num, protowire.BytesType)
	b = appendLen(b, len(s))
	return append(b, s...)
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = appendTag(b, num, protowire.BytesType)
	b = appendLen(b, len(v))
	return append(b, v...)
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = appendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendFixed64(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = appendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, v)
}

func appendFixed32(b []byte, num protowire.Number, v uint32) []byte {
	if v == 0 {
		return b
	}
	b = appendTag(b, num, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, v)
}

// openField starts an embedded message as field num, with room for a
// one-byte length, and says where its content starts; closeField writes
// its length, moving the content right when the length needs more bytes.
func openField(b []byte, num protowire.Number) ([]byte, int) {
	b = appendTag(b, num, protowire.BytesType)
	b = append(b, 0)
	return b, len(b)
}

func closeField(b []byte, start int) []byte {
	n := len(b) - start
	if n < 0x80 {
		b[start-1] = byte(n)
		return b
	}
	size := protowire.SizeVarint(uint64(n))
	b = append(b, make([]byte, size-1)...)
	copy(b[start+size-1:], b[start:start+n])
	protowire.AppendVarint(b[:start-1], uint64(n))
	return b
}
