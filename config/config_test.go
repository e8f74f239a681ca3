package config

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// mustLoad loads a configuration that must be valid.
func mustLoad(t *testing.T, args []string, m map[string]string) *Config {
	t.Helper()
	cfg, err := Load(args, env(m), "/home/u", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestDefaults(t *testing.T) {
	cfg, err := Load(nil, env(nil), "/home/u", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Home != "/home/u/.car" || cfg.Port != 9100 || cfg.Bind != "127.0.0.1" ||
		cfg.Socket != "/home/u/.car/run/car-server.sock" || cfg.HandlerTimeout != 30*time.Minute ||
		cfg.ToolTimeout != 300*time.Second || cfg.MaxFrameBytes != 16<<20 || cfg.NoAuth ||
		cfg.LockPath != "/home/u/.car/run/daemon.lock" {
		t.Fatalf("defaults: %+v", cfg)
	}
}

func TestPrecedenceFileEnvFlag(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.yaml"),
		[]byte("port: 7000\nmax_in_flight: 5\nlog_format: console\nallowed_origins: [a.example, b.example]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := env(map[string]string{"CAR_HOME": home, "CAR_PORT": "7100", "CAR_HANDLER_TIMEOUT": "90"})
	cfg, err := Load([]string{"--port", "7200"}, e, "/home/u", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Port != 7200 {
		t.Fatalf("flag must beat env and file: port %d", cfg.Port)
	}
	if cfg.HandlerTimeout != 90*time.Second {
		t.Fatalf("CAR_HANDLER_TIMEOUT in seconds: %v", cfg.HandlerTimeout)
	}
	if cfg.MaxInFlight != 5 || cfg.LogFormat != "console" || strings.Join(cfg.AllowedOrigins, ",") != "a.example,b.example" {
		t.Fatalf("file values: %+v", cfg)
	}
	if cfg, err = Load(nil, e, "/home/u", io.Discard); err != nil {
		t.Fatal(err)
	}
	if cfg.Port != 7100 {
		t.Fatalf("env must beat file: port %d", cfg.Port)
	}
	if cfg.ConfigFile != filepath.Join(home, "config.yaml") {
		t.Fatalf("config file %q", cfg.ConfigFile)
	}
}

func TestTokenPathRules(t *testing.T) {
	cfg := mustLoad(t, nil, map[string]string{"CAR_HOME": "/srv/car", "XDG_RUNTIME_DIR": "/run/user/1"})
	if cfg.TokenPath != "/srv/car/ai.parslee.car/auth-token" {
		t.Fatalf("with CAR_HOME: %s", cfg.TokenPath)
	}
	cfg = mustLoad(t, nil, map[string]string{"XDG_RUNTIME_DIR": "/run/user/1"})
	if cfg.TokenPath != "/run/user/1/ai.parslee.car/auth-token" {
		t.Fatalf("with XDG_RUNTIME_DIR: %s", cfg.TokenPath)
	}
	cfg = mustLoad(t, nil, nil)
	if cfg.TokenPath != "/home/u/.config/ai.parslee.car/auth-token" {
		t.Fatalf("fallback: %s", cfg.TokenPath)
	}
}

func TestBadSettings(t *testing.T) {
	cases := []struct {
		args     []string
		env      map[string]string
		contains string
	}{
		{nil, map[string]string{"CAR_HOME": "rel"}, `CAR_HOME must be an absolute path, got "rel"`},
		{[]string{"--port", "x"}, nil, "port"},
		{nil, map[string]string{"CAR_NO_AUTH": "perhaps"}, "no_auth must be true or false"},
		{nil, map[string]string{"CAR_TOOL_TIMEOUT": "-3"}, "tool_timeout"},
		{[]string{"--max-in-flight", "0"}, nil, "max_in_flight must be at least 1"},
		{[]string{"--log-format", "xml"}, nil, "log_format"},
		{[]string{"extra"}, nil, "unexpected argument"},
		{[]string{"--config", "/nonexistent/c.yaml"}, nil, "read config file"},
	}
	for _, tc := range cases {
		_, err := Load(tc.args, env(tc.env), "/home/u", io.Discard)
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.contains) {
			t.Errorf("%v %v: want usage error containing %q, got %v", tc.args, tc.env, tc.contains, err)
		}
	}
}

func TestNoAuthAndSocketOff(t *testing.T) {
	cfg, err := Load([]string{"--socket", "off"}, env(map[string]string{"CAR_NO_AUTH": "1"}), "/home/u", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.NoAuth || cfg.Socket != "" {
		t.Fatalf("%+v", cfg)
	}
}
