package connectors

import (
	"fmt"
	"io"
	"mime"
	"net/http"
)

// boundedTransport adds a connector's secret headers to every request and
// bounds a JSON response body to max bytes (an event stream is bounded per
// event by the SDK's MaxEventSize).
type boundedTransport struct {
	base    http.RoundTripper
	headers map[string]string
	max     int64
	over    func()
}

func (t *boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			req.Header.Set(k, v)
		}
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" {
		resp.Body = &boundedBody{ReadCloser: resp.Body, left: t.max, over: t.over}
	}
	return resp, nil
}

// boundedBody fails a read past its bytes.
type boundedBody struct {
	io.ReadCloser
	left int64
	over func()
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		b.over()
		return 0, fmt.Errorf("%w: response body over mcp_max_result_bytes", errTooLarge)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
