package tracing

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Protocols an exporter speaks (OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Defaults of the settings, shown by config.
const (
	DefaultProtocol    = ProtocolHTTP
	DefaultServiceName = "car-server"
	DefaultSampler     = "parentbased_always_on"
	DefaultQueueSpans  = 2048
	DefaultBatchSpans  = 512
)

// Settings configure tracing; every field has the meaning of the OTEL_*
// variable named beside it. A zero Settings is tracing off.
type Settings struct {
	Endpoint           string // OTEL_EXPORTER_OTLP_ENDPOINT: base URL; /v1/traces is added for HTTP
	TracesEndpoint     string // OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: the full URL, used as is; wins over Endpoint
	Protocol           string // OTEL_EXPORTER_OTLP_PROTOCOL: http/protobuf (default) or grpc
	Headers            string // OTEL_EXPORTER_OTLP_HEADERS: k=v,k2=v2, values URL-encoded
	ServiceName        string // OTEL_SERVICE_NAME (car-server)
	ResourceAttributes string // OTEL_RESOURCE_ATTRIBUTES: k=v,k2=v2
	Sampler            string // OTEL_TRACES_SAMPLER (parentbased_always_on)
	SamplerArg         string // OTEL_TRACES_SAMPLER_ARG: the ratio of the traceidratio samplers
	QueueSpans         int    // ended spans waiting for export; past it a span is dropped and counted (2048)
}

// SettingError is a setting that does not parse; Key is its configuration
// key (otel_traces_sampler), which names its flag and variable too.
type SettingError struct{ Key, Msg string }

func (e *SettingError) Error() string { return e.Msg }

func bad(key, format string, args ...any) error {
	return &SettingError{Key: key, Msg: fmt.Sprintf(format, args...)}
}

// Enabled reports whether an endpoint is configured.
func (s Settings) Enabled() bool { return s.Endpoint != "" || s.TracesEndpoint != "" }

// Check returns what is wrong with the settings, worded for the operator,
// or nil. Settings that are off are not checked past the endpoint.
func (s Settings) Check() error {
	if !s.Enabled() {
		return nil
	}
	if _, err := s.target(); err != nil {
		return err
	}
	if _, err := parsePairs(s.Headers, "otel_exporter_otlp_headers", "OTEL_EXPORTER_OTLP_HEADERS"); err != nil {
		return err
	}
	if _, err := s.resourceAttributes(); err != nil {
		return err
	}
	if _, err := s.sampler(); err != nil {
		return err
	}
	if s.QueueSpans < 0 {
		return bad("otel_trace_queue_spans", "otel_trace_queue_spans is %d: give a positive number of spans, or 0 for the default %d", s.QueueSpans, DefaultQueueSpans)
	}
	return nil
}

// protocol is the exporter's protocol, the default for "".
func (s Settings) protocol() (string, error) {
	switch p := strings.TrimSpace(s.Protocol); p {
	case "":
		return DefaultProtocol, nil
	case ProtocolHTTP, ProtocolGRPC:
		return p, nil
	case "http/json":
		return "", bad("otel_exporter_otlp_protocol", "OTEL_EXPORTER_OTLP_PROTOCOL http/json is not supported: use http/protobuf or grpc")
	default:
		return "", bad("otel_exporter_otlp_protocol", "OTEL_EXPORTER_OTLP_PROTOCOL is %q: use http/protobuf or grpc", p)
	}
}

// target is where spans go: the protocol and the parsed URL.
type target struct {
	protocol string
	url      *url.URL
}

func (s Settings) target() (target, error) {
	proto, err := s.protocol()
	if err != nil {
		return target{}, err
	}
	raw, key, name := s.TracesEndpoint, "otel_exporter_otlp_traces_endpoint", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	if raw == "" {
		raw, key, name = s.Endpoint, "otel_exporter_otlp_endpoint", "OTEL_EXPORTER_OTLP_ENDPOINT"
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return target{}, bad(key, "%s is %q: give a URL such as http://127.0.0.1:4318 (http/protobuf) or http://127.0.0.1:4317 (grpc)", name, raw)
	}
	if proto == ProtocolHTTP && s.TracesEndpoint == "" {
		// The signal-less endpoint is a base: the traces path is added.
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	}
	return target{protocol: proto, url: u}, nil
}

// sampler is the sampler OTEL_TRACES_SAMPLER names.
func (s Settings) sampler() (sdktrace.Sampler, error) {
	ratio := 1.0
	if arg := strings.TrimSpace(s.SamplerArg); arg != "" {
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return nil, bad("otel_traces_sampler_arg", "OTEL_TRACES_SAMPLER_ARG is %q: give a ratio from 0 to 1", s.SamplerArg)
		}
		ratio = r
	}
	name := strings.TrimSpace(s.Sampler)
	if name == "" {
		name = DefaultSampler
	}
	switch name {
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio), nil
	case "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), nil
	default:
		return nil, bad("otel_traces_sampler", "OTEL_TRACES_SAMPLER is %q: use always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio", name)
	}
}

// resourceAttributes are OTEL_RESOURCE_ATTRIBUTES as attributes.
func (s Settings) resourceAttributes() ([]attribute.KeyValue, error) {
	pairs, err := parsePairs(s.ResourceAttributes, "otel_resource_attributes", "OTEL_RESOURCE_ATTRIBUTES")
	if err != nil {
		return nil, err
	}
	kvs := make([]attribute.KeyValue, 0, len(pairs))
	for _, p := range pairs {
		kvs = append(kvs, attribute.String(p[0], p[1]))
	}
	return kvs, nil
}

// parsePairs reads the k=v,k2=v2 lists of the OTEL_* variables, each key
// and value URL-decoded (W3C Baggage's octets, as the specification says).
func parsePairs(list, setting, name string) ([][2]string, error) {
	var out [][2]string
	for item := range strings.SplitSeq(list, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		key, kerr := url.PathUnescape(strings.TrimSpace(k))
		val, verr := url.PathUnescape(strings.TrimSpace(v))
		if !ok || key == "" || kerr != nil || verr != nil {
			if setting == "otel_exporter_otlp_headers" {
				// A header may hold an API key: its value is not shown.
				return nil, bad(setting, "%s has an item that is not key=value (not shown: it may hold a secret): give key=value pairs separated by commas, URL-encoded", name)
			}
			return nil, bad(setting, "%s has %q: give key=value pairs separated by commas, URL-encoded", name, item)
		}
		out = append(out, [2]string{key, val})
	}
	return out, nil
}
