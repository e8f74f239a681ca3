package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// Config is every setting of the daemon, resolved.
type Config struct {
	Home               string        // state root; absolute
	Bind               string        // TCP listen host
	Port               int           // TCP listen port; 0 picks a free one
	Socket             string        // Unix socket path; empty disables it
	NoAuth             bool          // turn token auth off
	AuthToken          string        // use this token instead of a fresh one
	AllowedOrigins     []string      // Origin host patterns allowed besides same-host
	MaxFrameBytes      int64         // largest frame accepted
	MaxConnections     int           // concurrent connections
	MaxInFlight        int           // concurrent requests per connection
	HandlerTimeout     time.Duration // deadline of one request
	ToolTimeout        time.Duration // default budget of one tool callback
	ShutdownGrace      time.Duration // how long in-flight requests may finish on shutdown
	SupervisionTimeout time.Duration // how long a parked proposal waits for a supervisor
	MaxActions         int           // actions per proposal
	MaxConcurrency     int           // actions of one proposal running at once
	LogFormat          string        // json or console
	LogLevel           string        // debug, info, warn, error

	ConfigFile      string // the config file that was read, if any
	TokenPath       string // where the auth token is written
	LockPath        string // the advisory lock of the state root
	PoliciesDir     string // the operator's policy files
	IdempotencyPath string // the idempotency journal
	ApprovalsPath   string // the approval ledger
	MessagesPath    string // delivered messaging.send idempotency keys
	ShowVersion     bool   // --version was given
}

// ErrHelp is returned by Load when --help was asked for; the usage has been
// written.
var ErrHelp = pflag.ErrHelp

// UsageError is a bad setting: the daemon exits 2 with its message.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// setting is one configuration key with its flag, environment variable and
// default, so that --help, the README table and Load agree.
type setting struct {
	key, env, help string
	def            any
}

var settings = []setting{
	{"home", "CAR_HOME", "state root (absolute path)", "~/.car"},
	{"bind", "CAR_BIND", "TCP listen address (loopback only unless auth is on)", "127.0.0.1"},
	{"port", "CAR_PORT", "TCP listen port (0 picks a free port)", 9100},
	{"socket", "CAR_SERVER_SOCKET", `Unix socket path ("off" disables it)`, "$CAR_HOME/run/car-server.sock"},
	{"no_auth", "CAR_NO_AUTH", "turn token auth off (trusted single-user machines only)", false},
	{"auth_token", "CAR_AUTH_TOKEN", "use this token instead of a fresh random one", ""},
	{"allowed_origins", "CAR_ALLOWED_ORIGINS", "comma-separated Origin host patterns allowed to connect besides same-host", ""},
	{"max_frame_bytes", "CAR_MAX_FRAME_BYTES", "largest WebSocket frame accepted; bigger closes the connection (1009)", 16 << 20},
	{"max_connections", "CAR_MAX_CONNECTIONS", "concurrent connections", 1024},
	{"max_in_flight", "CAR_MAX_IN_FLIGHT", "concurrent requests per connection", 64},
	{"handler_timeout", "CAR_HANDLER_TIMEOUT", "deadline of one request (seconds or a duration like 30m)", "30m"},
	{"tool_timeout", "CAR_TOOL_TIMEOUT", "default budget of one tool callback (seconds or a duration)", "300s"},
	{"shutdown_grace", "CAR_SHUTDOWN_GRACE", "time in-flight requests get to finish on shutdown", "10s"},
	{"max_actions", "CAR_MAX_ACTIONS", "actions per proposal", 10000},
	{"supervision_timeout", "CAR_SUPERVISION_TIMEOUT", "how long a proposal waits for a supervisor before it is rejected", "30s"},
	{"max_concurrency", "CAR_MAX_CONCURRENCY", "actions of one proposal running at once", 16},
	{"log_format", "CAR_LOG_FORMAT", "log format: json or console", "json"},
	{"log_level", "CAR_LOG_LEVEL", "log level: debug, info, warn or error", "info"},
}

// Load resolves the configuration from args (without the program name),
// the environment lookup and the user's home directory. Usage goes to out.
func Load(args []string, lookupEnv func(string) (string, bool), userHome string, out io.Writer) (*Config, error) {
	fs := pflag.NewFlagSet("car-server", pflag.ContinueOnError)
	fs.SetOutput(out)
	for _, s := range settings {
		flag := strings.ReplaceAll(s.key, "_", "-")
		switch d := s.def.(type) {
		case bool:
			fs.Bool(flag, d, s.help)
		case int:
			fs.Int(flag, d, s.help)
		default:
			fs.String(flag, fmt.Sprint(d), s.help)
		}
	}
	configFile := fs.String("config", "", "config file (default $CAR_HOME/config.yaml when it exists)")
	version := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() { writeUsage(out, fs) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, ErrHelp
		}
		return nil, &UsageError{Msg: err.Error()}
	}
	if fs.NArg() > 0 {
		return nil, &UsageError{Msg: fmt.Sprintf("unexpected argument %q; run car-server --help", fs.Arg(0))}
	}

	v := viper.New()
	for _, s := range settings {
		v.SetDefault(s.key, s.def)
		if val, ok := lookupEnv(s.env); ok {
			v.Set("env."+s.key, val)
		}
		_ = v.BindPFlag("flag."+s.key, fs.Lookup(strings.ReplaceAll(s.key, "_", "-")))
	}

	// The state root decides where the config file is, so resolve it first.
	home := pick(v, fs, "home")
	if home == "~/.car" {
		home = filepath.Join(userHome, ".car")
	}
	if !filepath.IsAbs(home) {
		return nil, &UsageError{Msg: fmt.Sprintf("CAR_HOME must be an absolute path, got %q", home)}
	}
	home = filepath.Clean(home)

	cfg := &Config{Home: home, ShowVersion: *version}
	path := *configFile
	if path == "" {
		if p := filepath.Join(home, "config.yaml"); fileExists(p) {
			path = p
		}
	}
	if path != "" {
		fv := viper.New()
		fv.SetConfigFile(path)
		if err := fv.ReadInConfig(); err != nil {
			return nil, &UsageError{Msg: fmt.Sprintf("read config file %s: %v", path, err)}
		}
		for _, s := range settings {
			if fv.IsSet(s.key) {
				val := fv.Get(s.key)
				if list, ok := val.([]any); ok {
					parts := make([]string, len(list))
					for i, e := range list {
						parts[i] = fmt.Sprint(e)
					}
					val = strings.Join(parts, ",")
				}
				v.Set("file."+s.key, val)
			}
		}
		cfg.ConfigFile = path
	}
	if err := cfg.resolve(v, fs); err != nil {
		return nil, err
	}
	_, homeFromEnv := lookupEnv("CAR_HOME")
	cfg.TokenPath = tokenPath(home, homeFromEnv || fs.Changed("home") || v.IsSet("file.home"), userHome, lookupEnv)
	cfg.LockPath = filepath.Join(home, "run", "daemon.lock")
	cfg.PoliciesDir = filepath.Join(home, "policies")
	cfg.IdempotencyPath = filepath.Join(home, "idempotency.jsonl")
	cfg.ApprovalsPath = filepath.Join(home, "approvals.jsonl")
	cfg.MessagesPath = filepath.Join(home, "messages.jsonl")
	return cfg, nil
}

// pick returns a setting as a string, taking the first that is set of: the
// flag, the environment, the config file, the default.
func pick(v *viper.Viper, fs *pflag.FlagSet, key string) string {
	if fs.Changed(strings.ReplaceAll(key, "_", "-")) {
		return v.GetString("flag." + key)
	}
	if v.IsSet("env." + key) {
		return v.GetString("env." + key)
	}
	if v.IsSet("file." + key) {
		return v.GetString("file." + key)
	}
	return v.GetString(key)
}

func (c *Config) resolve(v *viper.Viper, fs *pflag.FlagSet) error {
	var errs []string
	str := func(key string) string { return pick(v, fs, key) }
	integer := func(key string) int {
		n, err := strconv.Atoi(strings.TrimSpace(str(key)))
		if err != nil || n < 0 {
			errs = append(errs, fmt.Sprintf("%s must be a non-negative integer, got %q", key, str(key)))
		}
		return n
	}
	boolean := func(key string) bool {
		s := strings.TrimSpace(str(key))
		if s == "" {
			return false
		}
		b, err := strconv.ParseBool(s)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s must be true or false (or 1/0), got %q", key, s))
		}
		return b
	}
	duration := func(key string) time.Duration {
		d, err := ParseDuration(str(key))
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", key, err))
		}
		return d
	}

	c.Bind = str("bind")
	c.Port = integer("port")
	c.Socket = str("socket")
	switch c.Socket {
	case "$CAR_HOME/run/car-server.sock":
		c.Socket = filepath.Join(c.Home, "run", "car-server.sock")
	case "off", "disabled", "none":
		c.Socket = ""
	}
	c.NoAuth = boolean("no_auth")
	c.AuthToken = strings.TrimSpace(str("auth_token"))
	for _, o := range strings.Split(str("allowed_origins"), ",") {
		if o = strings.TrimSpace(o); o != "" {
			c.AllowedOrigins = append(c.AllowedOrigins, o)
		}
	}
	c.MaxFrameBytes = int64(integer("max_frame_bytes"))
	c.MaxConnections = integer("max_connections")
	c.MaxInFlight = integer("max_in_flight")
	c.HandlerTimeout = duration("handler_timeout")
	c.ToolTimeout = duration("tool_timeout")
	c.ShutdownGrace = duration("shutdown_grace")
	c.SupervisionTimeout = duration("supervision_timeout")
	c.MaxActions = integer("max_actions")
	c.MaxConcurrency = integer("max_concurrency")
	c.LogFormat = str("log_format")
	c.LogLevel = str("log_level")
	if c.LogFormat != "json" && c.LogFormat != "console" {
		errs = append(errs, fmt.Sprintf("log_format must be json or console, got %q", c.LogFormat))
	}
	if c.Port > 65535 {
		errs = append(errs, fmt.Sprintf("port must be at most 65535, got %d", c.Port))
	}
	for _, k := range []struct {
		name string
		n    int64
	}{{"max_frame_bytes", c.MaxFrameBytes}, {"max_connections", int64(c.MaxConnections)}, {"max_in_flight", int64(c.MaxInFlight)}, {"max_actions", int64(c.MaxActions)}, {"max_concurrency", int64(c.MaxConcurrency)}} {
		if k.n == 0 {
			errs = append(errs, fmt.Sprintf("%s must be at least 1", k.name))
		}
	}
	if len(errs) > 0 {
		return &UsageError{Msg: "invalid configuration: " + strings.Join(errs, "; ")}
	}
	return nil
}

// ParseDuration accepts a Go duration ("90s", "30m") or a number of seconds.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseFloat(s, 64); err == nil {
		if n <= 0 {
			return 0, fmt.Errorf("must be positive, got %q", s)
		}
		return time.Duration(n * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("want seconds or a duration like 30s or 5m, got %q", s)
	}
	if d <= 0 {
		return 0, fmt.Errorf("must be positive, got %q", s)
	}
	return d, nil
}

// tokenPath follows the upstream rules: under the state root when CAR_HOME
// was given, else the per-user runtime or config directory.
func tokenPath(home string, homeGiven bool, userHome string, lookupEnv func(string) (string, bool)) string {
	const dir, file = "ai.parslee.car", "auth-token"
	if homeGiven {
		return filepath.Join(home, dir, file)
	}
	if runtime.GOOS == "darwin" {
		return filepath.Join(userHome, "Library", "Application Support", dir, file)
	}
	if xdg, ok := lookupEnv("XDG_RUNTIME_DIR"); ok && filepath.IsAbs(xdg) {
		return filepath.Join(xdg, dir, file)
	}
	return filepath.Join(userHome, ".config", dir, file)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func writeUsage(out io.Writer, fs *pflag.FlagSet) {
	fmt.Fprint(out, `car-server: the Common Agent Runtime daemon (JSON-RPC 2.0 over WebSocket)

Usage:
  car-server [flags]

Every setting can come from a flag, a CAR_* environment variable or the
config file ($CAR_HOME/config.yaml); flags win over the environment, which
wins over the file.

Settings:
`)
	for _, s := range settings {
		flag := "--" + strings.ReplaceAll(s.key, "_", "-")
		fmt.Fprintf(out, "  %-20s %-22s %s (default %v)\n", flag, s.env, s.help, s.def)
	}
	fmt.Fprintf(out, "  %-20s %-22s %s\n", "--config FILE", "", "read settings from FILE instead of $CAR_HOME/config.yaml")
	fmt.Fprintf(out, "  %-20s %-22s %s\n", "--version", "", "print the version and exit")
	fmt.Fprintf(out, "  %-20s %-22s %s\n", "--help", "", "print this help and exit")
}
