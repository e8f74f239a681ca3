package config

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/parslee-ai/car-server/protocol"
)

// reader turns the values viper resolved into typed settings, strictly: a
// value that does not parse is an error naming the key and where the value
// came from, never a silent zero.
type reader struct {
	v    *viper.Viper
	fs   *pflag.FlagSet
	file string          // the config file read, if any
	errs []string        // every fault found, reported together
	bad  map[string]bool // keys with a fault, so a later check does not report them twice
}

const originDefault = "the default"

// origin names where the value viper returned for key came from, for error
// messages. It follows viper's order: a flag given, the environment, the
// config file, the default.
func (r *reader) origin(key string) string {
	s, _ := lookup(key)
	switch {
	case r.fs.Changed(s.flag()):
		return "--" + s.flag()
	case envSet(s.env):
		return s.env
	case r.file != "" && r.v.InConfig(key):
		return "config file " + r.file
	}
	return originDefault
}

func envSet(name string) bool {
	_, ok := os.LookupEnv(name)
	return ok
}

// fail records a fault of key, naming the source of its value.
func (r *reader) fail(key, format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...)+" (from "+r.origin(key)+")")
	if r.bad == nil {
		r.bad = map[string]bool{}
	}
	r.bad[key] = true
}

// str returns a setting as text. Flags and the environment give text; a
// config file may give a number or a boolean, which is written out, or a
// list or a table, which is refused.
func (r *reader) str(key string) string {
	s, _ := r.scalar(key)
	return s
}

// scalar is str that also says whether the value was usable, so that a list
// given for a number is reported once, not twice.
func (r *reader) scalar(key string) (string, bool) {
	s, ok := text(r.v.Get(key))
	if !ok {
		r.fail(key, "%s must be a single value, got %v", key, r.v.Get(key))
	}
	return s, ok
}

// text writes a scalar value out as text; lists and tables are not scalars.
func text(x any) (string, bool) {
	switch x := x.(type) {
	case nil:
		return "", true
	case string:
		return x, true
	case float64: // JSON numbers; never in exponent form
		return strconv.FormatFloat(x, 'f', -1, 64), true
	case []any, []string, map[string]any:
		return "", false
	default:
		return fmt.Sprint(x), true
	}
}

// secret is str for a value that may hold a password: a fault names the
// key, never the value.
func (r *reader) secret(key string) string {
	s, ok := text(r.v.Get(key))
	if !ok {
		r.fail(key, "%s must be a single value (not shown: it may hold a password)", key)
	}
	return strings.TrimSpace(s)
}

func (r *reader) integer(key string) int {
	s, ok := r.scalar(key)
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 {
		r.fail(key, "%s must be a non-negative integer, got %q", key, s)
	}
	return n
}

func (r *reader) boolean(key string) bool {
	s, ok := r.scalar(key)
	if s = strings.TrimSpace(s); !ok || s == "" {
		return false
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		r.fail(key, "%s must be true or false (or 1/0), got %q", key, s)
	}
	return b
}

func (r *reader) duration(key string) time.Duration {
	s, ok := r.scalar(key)
	if !ok {
		return 0
	}
	d, err := ParseDuration(s)
	if err != nil {
		r.fail(key, "%s: %v", key, err)
	}
	return d
}

// list returns a setting given as a comma-separated string or, in a config
// file, as a list; blank entries are dropped.
func (r *reader) list(key string) []string {
	var parts []string
	switch x := r.v.Get(key).(type) {
	case []any:
		for _, e := range x {
			s, ok := text(e)
			if !ok {
				r.fail(key, "%s must be a list of single values, got %v", key, x)
				return nil
			}
			parts = append(parts, s)
		}
	default:
		parts = strings.Split(r.str(key), ",")
	}
	var out []string
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// ParseDuration accepts a Go duration ("90s", "30m") or a number of
// seconds; seconds past what a Duration holds saturate.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(n) || n <= 0 {
			return 0, fmt.Errorf("must be positive, got %q", s)
		}
		return protocol.Seconds(n), nil
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
