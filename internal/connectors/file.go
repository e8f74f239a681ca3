package connectors

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/parslee-ai/car-server/internal/atomicfile"
	"github.com/parslee-ai/car-server/internal/policy"
)

// fileConnectors is connectors.toml: [[connector]] tables.
type fileConnectors struct {
	Connector []fileConnector `toml:"connector"`
}

type fileConnector struct {
	Name        string            `toml:"name"`
	URL         string            `toml:"url"`
	HeadersFile string            `toml:"headers_file"`
	Command     string            `toml:"command"`
	Args        []string          `toml:"args"`
	Env         map[string]string `toml:"env"`
	Enable      []string          `toml:"enable"`
	Classify    map[string]string `toml:"classify"` // tool → tier, over its annotations
}

// LoadFile reads the operator's connectors file; a missing file declares
// none. Every error names the file and, where it can, the line.
func LoadFile(path string) ([]Spec, error) {
	text, err := atomicfile.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("connectors file %s: %w", path, err)
	}
	var f fileConnectors
	md, err := toml.Decode(string(text), &f)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("connectors file %s: line %d: %s", path, pe.Position.Line, pe.Message)
		}
		return nil, fmt.Errorf("connectors file %s: %w", path, err)
	}
	lines := tableLines(text)
	at := func(i int) string {
		if i < len(lines) {
			return fmt.Sprintf("connectors file %s: line %d: [[connector]] %d", path, lines[i], i+1)
		}
		return fmt.Sprintf("connectors file %s: [[connector]] %d", path, i+1)
	}
	if undecoded := md.Undecoded(); len(undecoded) > 0 {
		keys := make([]string, len(undecoded))
		for i, k := range undecoded {
			keys[i] = k.String()
		}
		where := ""
		if n := keyLine(text, undecoded[0][len(undecoded[0])-1]); n > 0 {
			where = fmt.Sprintf("line %d: ", n)
		}
		return nil, fmt.Errorf("connectors file %s: %sunknown key %s (known: [[connector]] with name, url, headers_file, command, args, env, enable, classify)", path, where, strings.Join(keys, ", "))
	}
	out := make([]Spec, 0, len(f.Connector))
	slugs := map[string]int{}
	for i, fc := range f.Connector {
		slug, err := checkName(fc.Name)
		if fc.Name == "" {
			err = errors.New("name is required")
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", at(i), err)
		}
		if j, ok := slugs[slug]; ok {
			return nil, fmt.Errorf("%s: slug '%s' is also that of [[connector]] %d; names must differ in more than case and punctuation", at(i), slug, j+1)
		}
		for other, j := range slugs {
			if ambiguous(slug, other) {
				return nil, fmt.Errorf("%s: slug '%s' and that of [[connector]] %d ('%s') would make tool names ambiguous; rename one", at(i), slug, j+1, other)
			}
		}
		slugs[slug] = i
		spec := Spec{Name: fc.Name, URL: fc.URL, Command: fc.Command, Args: fc.Args, Env: fc.Env, Enable: fc.Enable, FromFile: true}
		for tool, tier := range fc.Classify {
			t, err := policy.ParseTier(tier)
			if err != nil {
				return nil, fmt.Errorf("%s: classify.%s: %w", at(i), tool, err)
			}
			if spec.Classify == nil {
				spec.Classify = map[string]policy.Tier{}
			}
			spec.Classify[tool] = t
		}
		switch {
		case fc.URL != "" && fc.Command != "":
			return nil, fmt.Errorf("%s: give url or command, not both", at(i))
		case fc.URL == "" && fc.Command == "":
			return nil, fmt.Errorf("%s: give url (a Streamable HTTP server) or command (a stdio server)", at(i))
		case fc.URL != "" && (len(fc.Args) > 0 || len(fc.Env) > 0):
			return nil, fmt.Errorf("%s: args and env are for a command, not a url", at(i))
		case fc.Command != "" && fc.HeadersFile != "":
			return nil, fmt.Errorf("%s: headers_file is for a url, not a command", at(i))
		}
		if fc.URL != "" && !strings.HasPrefix(fc.URL, "http://") && !strings.HasPrefix(fc.URL, "https://") {
			return nil, fmt.Errorf("%s: url %q is not http:// or https://", at(i), fc.URL)
		}
		if fc.HeadersFile != "" {
			hf := fc.HeadersFile
			if !filepath.IsAbs(hf) {
				hf = filepath.Join(filepath.Dir(path), hf)
			}
			if spec.Headers, err = readHeadersFile(hf); err != nil {
				return nil, fmt.Errorf("%s: %w", at(i), err)
			}
		}
		for _, t := range fc.Enable {
			if err := checkToolName(t); err != nil {
				return nil, fmt.Errorf("%s: enable: %w", at(i), err)
			}
		}
		if err := checkSecrets("env", fc.Env); err != nil {
			return nil, fmt.Errorf("%s: %w", at(i), err)
		}
		out = append(out, spec)
	}
	return out, nil
}

// tableLines are the 1-based lines of each [[connector]] header.
func tableLines(text []byte) []int {
	var out []int
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(nil, len(text)+1)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[[") && strings.TrimSpace(strings.Trim(line, "[] \t")) == "connector" {
			out = append(out, n)
		}
	}
	return out
}

// keyLine is the 1-based line where key is first assigned, or 0.
func keyLine(text []byte, key string) int {
	for n, line := range strings.Split(string(text), "\n") {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, key); ok && strings.HasPrefix(strings.TrimSpace(rest), "=") {
			return n + 1
		}
	}
	return 0
}

// readHeadersFile reads "Name: value" lines (blank lines and # comments
// skipped) from a file only its owner may read: the values are secrets.
func readHeadersFile(path string) (map[string]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("headers_file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("headers_file %s is readable by others (mode %04o); it holds secrets: chmod 600 it", path, fi.Mode().Perm())
	}
	data, err := atomicfile.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("headers_file: %w", err)
	}
	h := map[string]string{}
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("headers_file %s: line %d is not 'Name: value'", path, n+1)
		}
		h[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	if err := checkSecrets("headers_file", h); err != nil {
		return nil, err
	}
	return h, nil
}
