package policy

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/protocol"
)

// Tier is the authority an action needs: who may authorize it.
type Tier int

// Tiers, lowest first.
const (
	ReadOnly Tier = iota
	SandboxEdit
	FullAccess
)

var tierNames = [...]string{"read_only", "sandbox_edit", "full_access"}

// String names the tier; a value outside the three tiers reads "tier(N)"
// rather than panicking, so a log line never takes the daemon down.
func (t Tier) String() string {
	if t.valid() {
		return tierNames[t]
	}
	return fmt.Sprintf("tier(%d)", int(t))
}

func (t Tier) valid() bool { return t >= 0 && int(t) < len(tierNames) }

// ParseTier reads a tier name.
func ParseTier(s string) (Tier, error) {
	for i, n := range tierNames {
		if n == s {
			return Tier(i), nil
		}
	}
	return 0, fmt.Errorf("unknown tier '%s' (use read_only, sandbox_edit or full_access)", s)
}

// MarshalText writes the tier's name; an out-of-range tier is an error, not
// a name that ParseTier would reject when it is read back.
func (t Tier) MarshalText() ([]byte, error) {
	if !t.valid() {
		return nil, fmt.Errorf("tier %d is out of range (read_only, sandbox_edit, full_access are 0 to 2)", int(t))
	}
	return []byte(tierNames[t]), nil
}

// Classification is what the classifier infers about one action.
type Classification struct {
	Tier          Tier
	Reversibility protocol.Reversibility
	Signals       []string // why, for humans: "tool segment 'deploy'", "command keyword 'rm'"
}

// Word lists. Tool names are split into segments (snake, kebab, dotted,
// camel); command lines into words; parameter keys into segments. Nothing
// here is matched as a bare substring of a value.
var (
	readVerbs = set("read", "get", "list", "ls", "search", "find", "query", "fetch", "view", "show", "describe",
		"stat", "head", "cat", "grep", "lookup", "count", "inspect", "status", "info", "diff", "log", "logs", "tail", "peek", "check", "watch", "browse", "load", "open")
	editVerbs = set("write", "edit", "create", "update", "set", "put", "patch", "append", "move", "mv", "rename",
		"copy", "cp", "mkdir", "touch", "save", "insert", "upsert", "add", "replace", "format", "generate", "build", "compile", "test", "lint", "run")
	fullVerbs = set("deploy", "send", "email", "mail", "sms", "publish", "release", "push", "delete", "remove", "rm", "drop",
		"destroy", "purge", "wipe", "kill", "exec", "execute", "shell", "bash", "sh", "zsh", "powershell", "sudo", "charge", "pay", "payment",
		"transfer", "purchase", "buy", "refund", "secret", "secrets", "credential", "credentials", "password", "terminate",
		"shutdown", "reboot", "install", "uninstall", "ssh", "scp", "curl", "wget", "merge", "apply", "provision", "grant", "revoke")
	// Reversibility by tool segment.
	compensableVerbs  = set("insert", "upsert", "create", "add", "commit", "push", "deploy", "merge", "provision", "grant", "install", "release", "publish", "apply")
	irreversibleVerbs = set("send", "email", "mail", "sms", "charge", "pay", "payment", "transfer", "purchase", "buy", "refund",
		"delete", "remove", "rm", "drop", "destroy", "purge", "wipe", "kill", "terminate", "shutdown", "reboot", "exec", "execute", "shell", "bash", "sh", "sudo", "revoke")

	// Command lines: single words and two-word phrases, only in these params.
	commandParams   = set("command", "cmd", "args", "argv", "flags")
	commandWords    = set("rm", "sudo", "curl", "wget", "ssh", "scp", "rsync", "dd", "mkfs", "chmod", "chown", "kill", "pkill", "killall", "shutdown", "reboot", "aws", "gcloud", "az", "nc", "eval")
	commandPhrases  = []string{"terraform apply", "terraform destroy", "kubectl delete", "kubectl apply", "git push", "git reset", "npm publish", "docker push", "helm install", "helm upgrade", "drop database"}
	credentialWords = set("password", "passwd", "secret", "token", "apikey", "credential", "credentials", "passphrase")
	credentialPairs = []string{"api key", "private key", "access key", "secret key", "client secret"}
	pathParams      = set("path", "file", "filename", "filepath", "dest", "destination", "target", "src", "source", "output", "input", "dir", "directory", "to", "from")
	dangerPhrases   = []string{"drop table", "drop database", "delete from", "truncate table", "rm -rf", "rm -fr", "git reset", "git push --force", "mkfs", ":(){"}
	secretPaths     = regexp.MustCompile(`(?i)(^|/)(\.ssh(/|$)|\.aws/credentials|\.gnupg(/|$)|\.kube/config|\.netrc|\.docker/config\.json|id_rsa|id_ed25519|id_ecdsa)|\.pem$|\.key$|\.p12$|\.pfx$|(^|/)\.env$|^/etc/(shadow|sudoers)`)
)

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// The signals most classifications end with, shared: signals are only read.
var (
	readOnlyName     = []string{"read-only tool name"}
	unrecognisedTool = []string{"unrecognised tool: sandbox_edit by default"}
)

// Classify infers an action's required tier and its reversibility, each on
// its own axis. An unrecognised tool is sandbox_edit and irreversible.
func Classify(a *protocol.Action) Classification {
	switch a.Type {
	case protocol.ActionStateRead, protocol.ActionAssertion:
		return Classification{Tier: ReadOnly, Reversibility: protocol.Reversible, Signals: []string{"built-in " + string(a.Type)}}
	case protocol.ActionStateWrite:
		return Classification{Tier: SandboxEdit, Reversibility: protocol.Reversible, Signals: []string{"built-in state_write"}}
	}
	c := Classification{Tier: SandboxEdit, Reversibility: protocol.Irreversible}
	raise := func(t Tier, why string) {
		c.Tier = max(c.Tier, t)
		c.Signals = append(c.Signals, why)
	}
	segs := segments(a.Tool)
	read, edit, full := false, false, false
	for _, s := range segs {
		switch {
		case fullVerbs[s]:
			full = true
			raise(FullAccess, fmt.Sprintf("tool segment '%s'", s))
		case editVerbs[s]:
			edit = true
		case readVerbs[s]:
			read = true
		}
	}
	if read && !edit && !full {
		c.Tier = ReadOnly
	}
	c.Reversibility = reversibility(segs, read && !edit)
	raiseFromParams(a, &c)
	if len(c.Signals) == 0 {
		if c.Tier == ReadOnly {
			c.Signals = readOnlyName
		} else {
			c.Signals = unrecognisedTool
		}
	}
	return c
}

// ClassifyFrom classifies a tool call whose tool came with a classification
// of its own (an MCP tool's annotations): base stands for what the tool's
// name would say, and what the parameters show still raises it.
func ClassifyFrom(a *protocol.Action, base Classification) Classification {
	c := Classification{Tier: base.Tier, Reversibility: base.Reversibility, Signals: append([]string(nil), base.Signals...)}
	raiseFromParams(a, &c)
	return c
}

// raiseFromParams raises c for what a's parameters show: a command keyword,
// a credential path or key, a dangerous phrase.
func raiseFromParams(a *protocol.Action, c *Classification) {
	raise := func(t Tier, why string) {
		c.Tier = max(c.Tier, t)
		c.Signals = append(c.Signals, why)
	}
	// Command lines and target paths are read where their key says, at any
	// depth, whatever the value's shape (a string, an array, an object). The
	// outermost such key reads everything under it, so a key of the same
	// kind nested inside it has nothing more to find.
	walkParams(a.Parameters, func(k string, v any, inCommand, inPath bool) {
		lk := strings.ToLower(k)
		if commandParams[lk] && !inCommand {
			if w := commandSignal(v); w != "" {
				raise(FullAccess, fmt.Sprintf("command keyword '%s' in '%s'", w, k))
			}
		}
		if pathParams[lk] && !inPath {
			for _, s := range stringsIn(v) {
				if secretPaths.MatchString(path.Clean(s)) {
					raise(FullAccess, fmt.Sprintf("'%s' targets a credential path", k))
					break
				}
			}
		}
	})
	if key := credentialKey(a.Parameters); key != "" {
		raise(FullAccess, fmt.Sprintf("parameter key '%s' names a credential", key))
	}
	if p := dangerPhrase(a.Parameters); p != "" {
		raise(FullAccess, fmt.Sprintf("dangerous phrase '%s'", p))
	}
}

// reversibility is the second axis, from the tool name alone.
func reversibility(segs []string, readOnly bool) protocol.Reversibility {
	worst := protocol.Reversible
	known := readOnly
	for _, s := range segs {
		switch {
		case irreversibleVerbs[s]:
			return protocol.Irreversible
		case compensableVerbs[s]:
			worst, known = protocol.Compensable, true
		case editVerbs[s]:
			known = true
		}
	}
	if !known {
		return protocol.Irreversible
	}
	return worst
}

// segments splits a tool name at _ - . / and camelCase boundaries, lowercased.
func segments(name string) []string {
	var out []string
	eachSegment(name, func(s string) bool {
		out = append(out, s)
		return true
	})
	return out
}

// eachSegment calls f with each of name's segments in order, until f
// returns false. For an ASCII name it walks bytes, and a segment already in
// lower case is a slice of name, not a copy.
func eachSegment(name string, f func(segment string) bool) {
	if !isASCII(name) {
		for _, s := range segmentsOfRunes(name) {
			if !f(s) {
				return
			}
		}
		return
	}
	start := 0
	flush := func(end int) bool {
		return end <= start || f(strings.ToLower(name[start:end]))
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c == '_' || c == '-' || c == '.' || c == '/' || c == ' ' || c == ':':
			if !flush(i) {
				return
			}
			start = i + 1
		case isUpper(c) && i > 0 && (isLower(name[i-1]) || (i+1 < len(name) && isLower(name[i+1]))):
			if !flush(i) {
				return
			}
			start = i
		}
	}
	flush(len(name))
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }
func isLower(c byte) bool { return 'a' <= c && c <= 'z' }

// segmentsOfRunes is segments for names beyond ASCII.
func segmentsOfRunes(name string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	runes := []rune(name)
	for i, r := range runes {
		switch {
		case r == '_' || r == '-' || r == '.' || r == '/' || r == ' ' || r == ':':
			flush()
		case unicode.IsUpper(r) && i > 0 && (unicode.IsLower(runes[i-1]) || (i+1 < len(runes) && unicode.IsLower(runes[i+1]))):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
	}
	flush()
	return out
}

// words splits text into lowercase words at anything that is not a letter,
// digit or one of -_.
func words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_' || r == '.')
	})
}

// walkParams calls f for every key at any depth of m, through objects and
// arrays, in a stable order, saying whether the key is already under a
// command or a path key.
func walkParams(m map[string]any, f func(key string, v any, inCommand, inPath bool)) {
	var walk func(v any, inCommand, inPath bool)
	walk = func(v any, inCommand, inPath bool) {
		switch x := v.(type) {
		case map[string]any:
			inKeyOrder(x, func(k string, e any) bool {
				f(k, e, inCommand, inPath)
				lk := strings.ToLower(k)
				walk(e, inCommand || commandParams[lk], inPath || pathParams[lk])
				return false
			})
		case []any:
			for _, e := range x {
				walk(e, inCommand, inPath)
			}
		}
	}
	walk(m, false, false)
}

// stringsIn returns every string inside v, at any depth, in a stable order.
func stringsIn(v any) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			out = append(out, x)
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			inKeyOrder(x, func(_ string, e any) bool {
				walk(e)
				return false
			})
		}
	}
	walk(v)
	return out
}

// unquote drops shell quoting, so that r'm' reads as rm.
var unquote = strings.NewReplacer("'", "", "\"", "", "`", "", "\\", "")

// commandSignal finds a dangerous word or phrase in a command-line param.
func commandSignal(v any) string {
	text := unquote.Replace(strings.Join(stringsIn(v), " "))
	ws := words(text)
	joined := " " + strings.Join(ws, " ") + " "
	for _, p := range commandPhrases {
		if strings.Contains(joined, " "+p+" ") {
			return p
		}
	}
	for _, w := range ws {
		base := w
		if i := strings.LastIndexByte(w, '/'); i >= 0 {
			base = w[i+1:]
		}
		if commandWords[base] {
			return base
		}
	}
	return ""
}

// credentialKey returns the first parameter key, at any depth, that names a
// credential ("api_key", "db_password", "auth.token", "headers.0.api_key").
// The path is written out only for the key it returns.
func credentialKey(m map[string]any) string {
	var path []string // innermost first
	if !credentialIn(m, &path) {
		return ""
	}
	slices.Reverse(path)
	return strings.Join(path, ".")
}

// credentialIn reports whether v holds a key naming a credential, and then
// appends the path to it to *path, innermost first.
func credentialIn(v any, path *[]string) bool {
	switch x := v.(type) {
	case map[string]any:
		return inKeyOrder(x, func(k string, e any) bool {
			if namesCredential(k) || credentialIn(e, path) {
				*path = append(*path, k)
				return true
			}
			return false
		})
	case []any:
		for i, e := range x {
			if credentialIn(e, path) {
				*path = append(*path, strconv.Itoa(i))
				return true
			}
		}
	}
	return false
}

// inKeyOrder calls f with m's members in key order until f returns true,
// and reports whether it did; a map of one member needs no sorting.
func inKeyOrder(m map[string]any, f func(k string, v any) bool) bool {
	if len(m) == 1 {
		for k, v := range m {
			return f(k, v)
		}
	}
	for _, k := range jsonvalue.SortedKeys(m) {
		if f(k, m[k]) {
			return true
		}
	}
	return false
}

// namesCredential reports whether a parameter key names a credential.
func namesCredential(k string) bool {
	found, prev := false, ""
	eachSegment(k, func(s string) bool {
		// Every credential pair is two words: two segments in a row.
		found = credentialWords[s] || (prev != "" && credentialPairSet[prev+" "+s])
		prev = s
		return !found
	})
	return found
}

var credentialPairSet = set(credentialPairs...)

// dangerPhrase finds an always-dangerous phrase in any string value, at word
// boundaries: punctuation (; && $( …) and shell quoting separate nothing.
func dangerPhrase(v any) string {
	for _, s := range stringsIn(v) {
		if strings.Contains(s, ":(){") {
			return ":(){"
		}
		joined := " " + strings.Join(words(unquote.Replace(s)), " ") + " "
		for _, p := range dangerPhrases {
			if strings.Contains(joined, " "+p+" ") {
				return p
			}
		}
	}
	return ""
}

// UnmarshalText reads a tier's name.
func (t *Tier) UnmarshalText(b []byte) error {
	v, err := ParseTier(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}
