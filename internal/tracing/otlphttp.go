package tracing

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// httpExporter sends spans to an OTLP/HTTP collector as http/protobuf,
// encoded by appendExportRequest: the request the SDK's otlptracehttp
// exporter sends, without building its protobuf objects first. One export
// at a time (the queue has one goroutine); no retry, no compression.
type httpExporter struct {
	url     string
	headers map[string]string
	client  *http.Client

	mu   sync.Mutex
	buf  []byte        // the last request's body, reused once the transport is done with it
	open *atomic.Int32 // bodies over buf the transport has not closed yet
	shut atomic.Bool
}

// exporterUserAgent names the daemon's exporter to the collector.
const exporterUserAgent = "car-server OTLP exporter"

// maxResponseBytes bounds what is read of a collector's answer.
const maxResponseBytes = 64 << 10

func newHTTPExporter(u *url.URL, headers map[string]string) *httpExporter {
	return &httpExporter{
		url:     u.String(),
		headers: headers,
		client: &http.Client{Timeout: exportTimeout, Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         (&net.Dialer{Timeout: exportTimeout, KeepAlive: 30 * time.Second}).DialContext,
			ForceAttemptHTTP2:   true,
			MaxIdleConns:        2,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: exportTimeout,
		}},
	}
}

// ExportSpans makes one attempt to send spans.
func (e *httpExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.shut.Load() {
		return errors.New("trace exporter: shut down")
	}
	// The transport may still read the last request's body after Do
	// returns: its buffer is reused only once every body over it is
	// closed, else the next request gets a new one, sized by the last.
	if e.open == nil || e.open.Load() != 0 {
		e.buf, e.open = make([]byte, 0, cap(e.buf)), new(atomic.Int32)
	}
	body := appendExportRequest(e.buf[:0], spans)
	e.buf = body
	open := e.open
	newBody := func() io.ReadCloser {
		open.Add(1)
		return &requestBody{Reader: bytes.NewReader(body), open: open}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, newBody())
	if err != nil {
		return err
	}
	req.GetBody = func() (io.ReadCloser, error) { return newBody(), nil }
	req.ContentLength = int64(len(body)) // sent as is, not chunked
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("User-Agent", exporterUserAgent)
	for k, v := range e.headers {
		req.Header.Set(k, v)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return err // a *url.Error: the URL without its password
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return fmt.Errorf("trace export to %s: reading the answer: %w", req.URL.Redacted(), err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		text := strings.TrimSpace(string(answer[:min(len(answer), 512)]))
		return fmt.Errorf("trace export to %s: %s (body: %q)", req.URL.Redacted(), resp.Status, text)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/x-protobuf" {
		if rejected, msg := partialSuccess(answer); rejected != 0 || msg != "" {
			return fmt.Errorf("trace export to %s: the collector rejected %d spans: %s", req.URL.Redacted(), rejected, msg)
		}
	}
	return nil
}

// requestBody is a request's body over the exporter's buffer; closing it
// says the transport is done with the buffer.
type requestBody struct {
	*bytes.Reader
	open   *atomic.Int32
	closed atomic.Bool
}

func (b *requestBody) Close() error {
	if b.closed.CompareAndSwap(false, true) {
		b.open.Add(-1)
	}
	return nil
}

// partialSuccess reads ExportTraceServiceResponse.partial_success: how
// many spans the collector rejected, and why.
func partialSuccess(b []byte) (rejected int64, msg string) {
	ps := protoField(b, 1)
	if v := protoField(ps, 1); v != nil {
		n, _ := protowire.ConsumeVarint(v)
		rejected = int64(n)
	}
	return rejected, string(protoField(ps, 2))
}

// protoField is the last value of field num in message b: a varint's
// bytes, or a length-delimited field's content; nil when absent or when b
// does not parse.
func protoField(b []byte, num protowire.Number) []byte {
	var out []byte
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return nil
		}
		b = b[l:]
		l = protowire.ConsumeFieldValue(n, typ, b)
		if l < 0 {
			return nil
		}
		if n == num {
			switch typ {
			case protowire.BytesType:
				out, _ = protowire.ConsumeBytes(b[:l])
			case protowire.VarintType:
				out = b[:l]
			}
		}
		b = b[l:]
	}
	return out
}

// Shutdown stops exporting and closes idle connections.
func (e *httpExporter) Shutdown(context.Context) error {
	e.shut.Store(true)
	e.client.CloseIdleConnections()
	return nil
}
