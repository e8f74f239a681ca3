package flow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// Secret is the label whose data must never reach a sink.
const Secret = "secret"

// maxLabelsFileBytes bounds the labels file read at start and on SIGHUP.
const maxLabelsFileBytes = 4 << 20

// ToolLabel says what a tool does with data.
type ToolLabel struct {
	Source bool     `json:"source,omitempty"` // its output carries Labels
	Sink   bool     `json:"sink,omitempty"`   // it sends its parameters out of the daemon's reach
	Labels []string `json:"labels,omitempty"` // the labels a source's output carries
}

// Ordering forbids running Then after First without a person's approval.
type Ordering struct {
	First string `json:"first"`
	Then  string `json:"then"`
}

// Labels are the tool labels and forbidden orderings in force.
type Labels struct {
	Tools     map[string]ToolLabel `json:"tools"`
	Orderings []Ordering           `json:"orderings"`
}

// defaultSinks are the network and messaging tools: whatever they are given
// leaves the machine.
var defaultSinks = []string{
	"http_get", "http_post", "http_put", "http_patch", "http_delete", "http_request", "fetch", "fetch_url", "web_fetch",
	"curl", "webhook", "send_email", "email_send", "send_message", "slack_post", "post_message", "messaging.send",
	"upload", "upload_file",
}

// defaultSources are the secret and credential readers.
var defaultSources = []string{
	"read_secret", "get_secret", "secret_get", "read_credentials", "get_credentials", "read_credential",
	"get_credential", "get_api_key", "read_api_key", "read_env_secret", "keychain_get", "vault_read",
}

// Defaults are the built-in labels: network and messaging tools are sinks,
// secret and credential readers are sources labelled secret.
func Defaults() *Labels {
	l := &Labels{Tools: map[string]ToolLabel{}}
	for _, t := range defaultSinks {
		l.Tools[t] = ToolLabel{Sink: true}
	}
	for _, t := range defaultSources {
		l.Tools[t] = ToolLabel{Source: true, Labels: []string{Secret}}
	}
	return l
}

// Load reads the labels file at path and merges it over Defaults: a tool the
// file names takes the file's label whole. A missing file is Defaults. A
// file that does not parse, has keys this daemon does not know, or declares
// an ordering without both tools is an error naming the file.
func Load(path string) (*Labels, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return Defaults(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read tool labels %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxLabelsFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read tool labels %s: %w", path, err)
	}
	if len(data) > maxLabelsFileBytes {
		return nil, fmt.Errorf("tool labels %s is larger than %d bytes", path, maxLabelsFileBytes)
	}
	file, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("tool labels %s: %w; fix the file (its shape is {\"tools\": {name: {source?, sink?, labels?}}, \"orderings\": [{first, then}]})", path, err)
	}
	return Defaults().merge(file), nil
}

// Parse decodes a labels document strictly: unknown keys are refused.
func Parse(data []byte) (*Labels, error) {
	var l Labels
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one JSON document")
	}
	for name, t := range l.Tools {
		if name == "" {
			return nil, errors.New("a tool with an empty name")
		}
		if len(t.Labels) > 0 && !t.Source {
			return nil, fmt.Errorf("tool '%s' has labels but is not a source (set \"source\": true)", name)
		}
	}
	for i, o := range l.Orderings {
		if o.First == "" || o.Then == "" {
			return nil, fmt.Errorf("orderings[%d] needs both \"first\" and \"then\"", i)
		}
	}
	return &l, nil
}

// merge lays file over l: the file's tools replace l's, its orderings add.
func (l *Labels) merge(file *Labels) *Labels {
	for name, t := range file.Tools {
		l.Tools[name] = t
	}
	l.Orderings = append(l.Orderings, file.Orderings...)
	return l
}

// Counts are the number of sources, sinks and orderings, for the log.
func (l *Labels) Counts() (sources, sinks, orderings int) {
	for _, t := range l.Tools {
		if t.Source {
			sources++
		}
		if t.Sink {
			sinks++
		}
	}
	return sources, sinks, len(l.Orderings)
}

// label returns the label of a tool; a tool not named has none.
func (l *Labels) label(tool string) ToolLabel {
	if l == nil {
		return ToolLabel{}
	}
	return l.Tools[tool]
}
