package policy

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
)

// Bounds of a parameter preview: enough to judge an action, small enough to read.
const (
	previewMaxRunes = 200
	previewMaxDepth = 8
	previewMaxKeys  = 50
	previewMaxItems = 20
	redacted        = "[redacted]"
	tooDeep         = "[nested too deep]"
)

// headerCredentialWords name credentials the way HTTP headers and client
// libraries do, without a word Classify's credential list knows.
var headerCredentialWords = set("authorization", "auth", "cookie")

// Preview returns a copy of an action's parameters that a person can read
// before approving it, and that may be shown and logged.
//
// The value under any key that names a credential ("api_key", "password",
// "Authorization", …) is replaced by "[redacted]" at any depth, in objects
// and in objects inside arrays. Redaction is by key name only: a secret
// inside a string under an ordinary key is not found, though it is cut like
// any long string. Strings longer than 200 characters are cut with a marker
// saying how many were cut; objects show their first 50 keys in sorted order
// and arrays their first 20 items, the rest counted; containers more than 8
// levels deep read "[nested too deep]". params is never modified.
func Preview(params map[string]any) map[string]any {
	return previewObject(params, 1)
}

// redacts reports whether the preview hides a key's value: it names a
// credential, by the same test Classify applies, or is one of the header
// names above.
func redacts(key string) bool {
	if namesCredential(key) {
		return true
	}
	for _, s := range segments(key) {
		if headerCredentialWords[s] {
			return true
		}
	}
	return false
}

func previewObject(m map[string]any, depth int) map[string]any {
	keys := jsonvalue.SortedKeys(m)
	out := make(map[string]any, min(len(keys), previewMaxKeys)+1)
	for i, k := range keys {
		if i == previewMaxKeys {
			out["…"] = fmt.Sprintf("+%d more keys", len(keys)-previewMaxKeys)
			break
		}
		if redacts(k) {
			out[k] = redacted
			continue
		}
		out[k] = previewValue(m[k], depth+1)
	}
	return out
}

func previewValue(v any, depth int) any {
	switch x := v.(type) {
	case nil, bool, float64, float32, int, int64, int32, uint64, json.Number:
		return x
	case string:
		return previewString(x)
	case map[string]any:
		if depth > previewMaxDepth {
			return tooDeep
		}
		return previewObject(x, depth)
	case []any:
		if depth > previewMaxDepth {
			return tooDeep
		}
		n := min(len(x), previewMaxItems)
		out := make([]any, 0, n+1)
		for _, e := range x[:n] {
			out = append(out, previewValue(e, depth+1))
		}
		if len(x) > n {
			out = append(out, fmt.Sprintf("…(+%d more items)", len(x)-n))
		}
		return out
	default:
		// A Go value that is not decoded JSON (a map[string]string of
		// headers, a struct) is previewed as the JSON it would send, so its
		// keys are checked like any other.
		return previewValue(asJSON(x), depth)
	}
}

// asJSON re-decodes a value as generic JSON, or describes it when it has none.
func asJSON(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("[a %T that is not JSON]", v)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return fmt.Sprintf("[a %T that is not JSON]", v)
	}
	return out
}

// previewString cuts s after previewMaxRunes characters, saying how many were cut.
func previewString(s string) string {
	n := utf8.RuneCountInString(s)
	if n <= previewMaxRunes {
		return s
	}
	cut := 0
	for i := range s {
		if cut == previewMaxRunes {
			return fmt.Sprintf("%s…(+%d chars)", s[:i], n-previewMaxRunes)
		}
		cut++
	}
	return s
}
