package tracingtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/testwait"
)

// Install is what a test without Jaeger says to run.
const Install = "install the trace backend: (cd tools/jaeger && go install github.com/jaegertracing/jaeger/cmd/jaeger), or set CAR_JAEGER to its binary"

// httpClient keeps no connection open between requests: a test that ends
// leaves no goroutine of this package behind for goleak to find.
var httpClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}

// waitLimit bounds every wait here; a hang guard, not a performance bound.
const waitLimit = 60 * time.Second

// Jaeger is a running Jaeger all-in-one.
type Jaeger struct {
	HTTP  string // OTLP over HTTP/protobuf: http://127.0.0.1:PORT
	GRPC  string // OTLP over gRPC: http://127.0.0.1:PORT
	Query string // the query API: http://127.0.0.1:PORT
	Log   string // its log file

	pid int
}

// Binary finds the jaeger binary: CAR_JAEGER, then PATH, then GOBIN or
// GOPATH/bin. Under CI=true a missing binary fails tb; elsewhere it skips.
func Binary(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("CAR_JAEGER"); p != "" {
		return p
	}
	if p, err := exec.LookPath("jaeger"); err == nil {
		return p
	}
	var dirs []string
	if gobin := goEnv("GOBIN"); gobin != "" {
		dirs = append(dirs, gobin)
	}
	for _, gp := range filepath.SplitList(goEnv("GOPATH")) {
		dirs = append(dirs, filepath.Join(gp, "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "jaeger")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		tb.Fatalf("no jaeger binary: %s", Install)
	}
	tb.Skip(Install)
	return ""
}

var goEnvCache sync.Map

func goEnv(name string) string {
	if v, ok := goEnvCache.Load(name); ok {
		return v.(string)
	}
	out, _ := exec.Command("go", "env", name).Output() // no go: no such directory
	v := strings.TrimSpace(string(out))
	goEnvCache.Store(name, v)
	return v
}

// freePorts are n loopback ports free a moment ago.
func freePorts(tb testing.TB, n int) []int {
	tb.Helper()
	ports := make([]int, n)
	ls := make([]net.Listener, n)
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		ls[i], ports[i] = l, l.Addr().(*net.TCPAddr).Port
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

const config = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: mem
    enable_tracing: false
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 100000
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
      grpc:
        endpoint: 127.0.0.1:%d
processors:
  batch:
    timeout: 50ms
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`

// Start runs Jaeger on loopback ports until the test ends, and waits until
// its receiver and query API answer.
func Start(tb testing.TB) *Jaeger {
	tb.Helper()
	bin := Binary(tb)
	dir := tb.TempDir()
	p := freePorts(tb, 4)
	cfg := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, config, p[0], p[1], p[2], p[3]), 0o600); err != nil {
		tb.Fatal(err)
	}
	j := &Jaeger{
		Query: "http://127.0.0.1:" + strconv.Itoa(p[0]),
		HTTP:  "http://127.0.0.1:" + strconv.Itoa(p[2]),
		GRPC:  "http://127.0.0.1:" + strconv.Itoa(p[3]),
		Log:   filepath.Join(dir, "jaeger.log"),
	}
	logFile, err := os.Create(j.Log)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", cfg)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), "OTEL_SDK_DISABLED=true", "OTEL_TRACES_EXPORTER=none")
	if err := cmd.Start(); err != nil {
		logFile.Close()
		tb.Fatalf("start %s: %v", bin, err)
	}
	j.pid = cmd.Process.Pid
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logFile.Close(); close(exited) }()
	tb.Cleanup(func() {
		_ = cmd.Process.Kill() // in-memory: nothing to flush
		<-exited
	})
	up := func() bool {
		select {
		case <-exited:
			log, _ := os.ReadFile(j.Log)
			tb.Fatalf("jaeger exited:\n%s", log)
		default:
		}
		resp, err := httpClient.Get(j.Query + "/api/services")
		if err != nil {
			return false
		}
		resp.Body.Close()
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(j.HTTP, "http://"), time.Second)
		if err != nil {
			return false
		}
		c.Close()
		c, err = net.DialTimeout("tcp", strings.TrimPrefix(j.GRPC, "http://"), time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return resp.StatusCode == http.StatusOK
	}
	testwait.Eventually(tb, waitLimit, "jaeger's query API and OTLP receivers", up)
	return j
}

// CPU is the processor time Jaeger has used so far, user and system, as
// /proc counts it (in clock ticks of 10 ms); false where /proc does not
// say, for a benchmark to report what the collector's ingest costs on the
// same machine.
func (j *Jaeger) CPU() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(j.pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name (field 2) may hold spaces; the fields after its
	// closing parenthesis start with field 3. utime and stime are 14 and 15.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(u+s) * (time.Second / clockTicks), true
}

// clockTicks is USER_HZ, the unit of /proc's times: 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// Span is one span as the query API returns it (OTLP JSON).
type Span struct {
	TraceID      string      `json:"traceId"`
	SpanID       string      `json:"spanId"`
	ParentSpanID string      `json:"parentSpanId"`
	Name         string      `json:"name"`
	Kind         int         `json:"kind"`
	Start        json.Number `json:"startTimeUnixNano"`
	End          json.Number `json:"endTimeUnixNano"`
	Attributes   []KeyValue  `json:"attributes"`
	Events       []struct {
		Name       string     `json:"name"`
		Attributes []KeyValue `json:"attributes"`
	} `json:"events"`
	Links []struct {
		TraceID string `json:"traceId"`
		SpanID  string `json:"spanId"`
	} `json:"links"`
	Status struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"status"`
	Resource []KeyValue `json:"-"` // the resource's attributes
}

// KeyValue is an OTLP JSON attribute.
type KeyValue struct {
	Key   string `json:"key"`
	Value struct {
		String *string          `json:"stringValue"`
		Int    *json.Number     `json:"intValue"`
		Double *float64         `json:"doubleValue"`
		Bool   *bool            `json:"boolValue"`
		Other  *json.RawMessage `json:"arrayValue"`
	} `json:"value"`
}

// Attr is the attribute k of the span as text ("" when absent).
func (s Span) Attr(k string) string { return find(s.Attributes, k) }

// ResourceAttr is the resource attribute k as text.
func (s Span) ResourceAttr(k string) string { return find(s.Resource, k) }

// Duration is how long the span lasted.
func (s Span) Duration() time.Duration {
	a, _ := strconv.ParseInt(s.Start.String(), 10, 64)
	b, _ := strconv.ParseInt(s.End.String(), 10, 64)
	return time.Duration(b - a)
}

func find(kvs []KeyValue, k string) string {
	for _, kv := range kvs {
		if kv.Key != k {
			continue
		}
		v := kv.Value
		switch {
		case v.String != nil:
			return *v.String
		case v.Int != nil:
			return v.Int.String()
		case v.Double != nil:
			return strconv.FormatFloat(*v.Double, 'f', -1, 64)
		case v.Bool != nil:
			return strconv.FormatBool(*v.Bool)
		}
	}
	return ""
}

// Trace reads the spans of a trace back from the query API; it returns
// what is stored now (nil while the trace is not there yet).
func (j *Jaeger) Trace(ctx context.Context, traceID string) ([]Span, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.Query+"/api/v3/traces/"+traceID, nil)
	if err != nil {
		return nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusNotFound {
		return nil, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("jaeger query %s: %s: %s", traceID, resp.Status, body)
	}
	var out struct {
		Result struct {
			ResourceSpans []struct {
				Resource struct {
					Attributes []KeyValue `json:"attributes"`
				} `json:"resource"`
				ScopeSpans []struct {
					Spans []Span `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("jaeger query %s: %v: %s", traceID, err, body)
	}
	var spans []Span
	for _, rs := range out.Result.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				s.Resource = rs.Resource.Attributes
				spans = append(spans, s)
			}
		}
	}
	return spans, nil
}

// WaitTrace waits until the stored spans of the trace satisfy done (all
// the spans a test expects have arrived) and returns them.
func (j *Jaeger) WaitTrace(tb testing.TB, traceID string, done func([]Span) bool) []Span {
	tb.Helper()
	var spans []Span
	defer func() {
		if tb.Failed() { // what had arrived, to tell a missing span from a misnamed one
			names := make([]string, len(spans))
			for i, s := range spans {
				names[i] = s.Name
			}
			tb.Logf("spans of trace %s in jaeger at the end: %q", traceID, names)
		}
	}()
	testwait.Eventually(tb, waitLimit, "the spans of trace "+traceID+" in jaeger", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		got, err := j.Trace(ctx, traceID)
		if err != nil {
			return false
		}
		spans = got
		return done(spans)
	})
	return spans
}

// Named returns the spans called name.
func Named(spans []Span, name string) []Span {
	var out []Span
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}
