package connectors

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/parslee-ai/car-server/internal/atomicfile"
)

// The files the wire's choices survive a restart in, both 0600: the
// manifest (connectors and their enabled tools) and, apart from it, the
// secret header and environment values.
const (
	manifestFile = "connectors.json"
	secretsFile  = "connectors.secrets.json"
)

type manifest struct {
	Connectors []manifestEntry `json:"connectors"`
}

type manifestEntry struct {
	Slug     string   `json:"slug"`
	Name     string   `json:"name"`
	URL      string   `json:"url,omitempty"`
	Command  string   `json:"command,omitempty"`
	Args     []string `json:"args,omitempty"`
	FromFile bool     `json:"from_file,omitempty"` // connectors.toml declares it; only its enabled tools are kept here
	Enabled  []string `json:"enabled"`
}

type secrets struct {
	Headers map[string]string `json:"headers,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

type saved struct {
	slug    string
	spec    Spec
	enabled []string
}

// load reads the manifest and the secrets; missing files are no connectors.
func (m *Manager) load() ([]saved, error) {
	var man manifest
	if err := readJSON(filepath.Join(m.opts.Home, manifestFile), &man); err != nil {
		return nil, err
	}
	sec := map[string]secrets{}
	if err := readJSON(filepath.Join(m.opts.Home, secretsFile), &sec); err != nil {
		return nil, err
	}
	out := make([]saved, 0, len(man.Connectors))
	for _, e := range man.Connectors {
		s := sec[e.Slug]
		out = append(out, saved{slug: e.Slug, enabled: e.Enabled, spec: Spec{
			Name: e.Name, URL: e.URL, Command: e.Command, Args: e.Args, FromFile: e.FromFile, Headers: s.Headers, Env: s.Env,
		}})
	}
	return out, nil
}

func readJSON(path string, v any) error {
	data, err := atomicfile.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s is not valid JSON (%w); fix or remove it", path, err)
	}
	return nil
}

// save writes both files from the connectors held. Writes are serialised
// under m.mu so the files never go back to an older state.
func (m *Manager) save() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	man := manifest{Connectors: []manifestEntry{}}
	sec := map[string]secrets{}
	for slug, c := range m.conns {
		e := manifestEntry{Slug: slug, Name: c.spec.Name, FromFile: c.spec.FromFile, Enabled: c.enabledNames()}
		if !c.spec.FromFile {
			e.URL, e.Command, e.Args = c.spec.URL, c.spec.Command, c.spec.Args
			if len(c.spec.Headers) > 0 || len(c.spec.Env) > 0 {
				sec[slug] = secrets{Headers: c.spec.Headers, Env: c.spec.Env}
			}
		}
		man.Connectors = append(man.Connectors, e)
	}
	sort.Slice(man.Connectors, func(i, j int) bool { return man.Connectors[i].Slug < man.Connectors[j].Slug })
	data, err := json.MarshalIndent(sec, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(m.opts.Home, secretsFile), data); err != nil {
		return fmt.Errorf("saving the connectors' secrets: %w", err)
	}
	if data, err = json.MarshalIndent(man, "", "  "); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(m.opts.Home, manifestFile), data); err != nil {
		return fmt.Errorf("saving the connectors: %w", err)
	}
	return nil
}
