package policy

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

const previewSecret = "sk-live-7f3a9c1e0b"

func marshalPreview(t *testing.T, params map[string]any) string {
	t.Helper()
	b, err := json.Marshal(Preview(params))
	if err != nil {
		t.Fatalf("marshal preview: %v", err)
	}
	return string(b)
}

func TestPreviewNeverShowsACredentialValue(t *testing.T) {
	cases := []struct {
		name   string
		params map[string]any
	}{
		{"api_key", map[string]any{"api_key": previewSecret}},
		{"password", map[string]any{"user": "ana", "password": previewSecret}},
		{"camelCase apiKey", map[string]any{"apiKey": previewSecret}},
		{"Authorization header", map[string]any{"url": "https://x", "headers": map[string]any{"Authorization": "Bearer " + previewSecret}}},
		{"cookie header", map[string]any{"headers": map[string]any{"Cookie": "session=" + previewSecret}}},
		{"inside an array of objects", map[string]any{"targets": []any{
			map[string]any{"host": "a"},
			map[string]any{"host": "b", "db_password": previewSecret},
		}}},
		{"credential naming an object", map[string]any{"credentials": map[string]any{"user": previewSecret}}},
		{"deep", map[string]any{"a": map[string]any{"b": []any{[]any{map[string]any{"client_secret": previewSecret}}}}}},
		{"a Go map of headers", map[string]any{"headers": map[string]string{"Authorization": previewSecret}}},
		{"a long secret", map[string]any{"token": strings.Repeat(previewSecret, 50)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := marshalPreview(t, c.params)
			if strings.Contains(got, previewSecret) || strings.Contains(got, previewSecret[:10]) {
				t.Fatalf("the secret reached the preview: %s", got)
			}
			if !strings.Contains(got, `"[redacted]"`) {
				t.Fatalf("nothing was redacted: %s", got)
			}
		})
	}
}

func TestPreviewKeepsOrdinaryValues(t *testing.T) {
	params := map[string]any{
		"path":    "/tmp/x",
		"count":   3.0,
		"force":   true,
		"nothing": nil,
		"author":  "ana", // not "auth"
		"tags":    []any{"a", "b"},
	}
	got := Preview(params)
	if !reflect.DeepEqual(got, params) {
		t.Fatalf("Preview changed ordinary values:\n got %#v\nwant %#v", got, params)
	}
}

// Redaction is by key name: a secret inside an ordinary string is kept,
// though cut like any long string.
func TestPreviewRedactsByKeyNameOnly(t *testing.T) {
	body := "curl -H 'Authorization: " + previewSecret + "' " + strings.Repeat("x", 300)
	got := Preview(map[string]any{"command": body})["command"].(string)
	if !strings.Contains(got, previewSecret) {
		t.Fatalf("a secret under an ordinary key was changed: %q", got)
	}
	if want := fmt.Sprintf("…(+%d chars)", len([]rune(body))-200); !strings.HasSuffix(got, want) {
		t.Fatalf("long string not cut with %q: %q", want, got)
	}
}

func TestPreviewCutsLongStrings(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want string
	}{
		{"short", "hello", "hello"},
		{"exactly 200", strings.Repeat("a", 200), strings.Repeat("a", 200)},
		{"201", strings.Repeat("a", 201), strings.Repeat("a", 200) + "…(+1 chars)"},
		{"counts characters, not bytes", strings.Repeat("é", 1434), strings.Repeat("é", 200) + "…(+1234 chars)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Preview(map[string]any{"text": c.in, "list": []any{c.in}})
			if got["text"] != c.want || got["list"].([]any)[0] != c.want {
				t.Fatalf("got %q and %q, want %q", got["text"], got["list"].([]any)[0], c.want)
			}
		})
	}
}

func TestPreviewBoundsSize(t *testing.T) {
	many := map[string]any{}
	for i := range 53 {
		many[fmt.Sprintf("k%02d", i)] = i
	}
	items := make([]any, 25)
	for i := range items {
		items[i] = i
	}
	got := Preview(map[string]any{"obj": many, "arr": items})

	obj := got["obj"].(map[string]any)
	if len(obj) != 51 || obj["…"] != "+3 more keys" || obj["k49"] != 49 || obj["k50"] != nil {
		t.Fatalf("object preview has %d keys, summary %v; want k00..k49 and \"+3 more keys\"", len(obj), obj["…"])
	}
	arr := got["arr"].([]any)
	if len(arr) != 21 || arr[19] != 19 || arr[20] != "…(+5 more items)" {
		t.Fatalf("array preview = %v; want items 0..19 then \"…(+5 more items)\"", arr)
	}
}

func TestPreviewBoundsDepth(t *testing.T) {
	// params is level 1; build containers down to level 10.
	var inner any = "bottom"
	for range 9 {
		inner = map[string]any{"n": inner}
	}
	params := inner.(map[string]any)
	var v any = Preview(params)
	for level := 1; level <= 8; level++ {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("level %d is %#v, want an object", level, v)
		}
		v = m["n"]
	}
	if v != "[nested too deep]" {
		t.Fatalf("level 9 is %#v, want \"[nested too deep]\"", v)
	}
	arr := Preview(map[string]any{"a": []any{[]any{[]any{[]any{[]any{[]any{[]any{[]any{"x"}}}}}}}}})
	b, err := json.Marshal(arr)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":[[[[[[["[nested too deep]"]]]]]]]}`; string(b) != want {
		t.Fatalf("nested arrays preview %s, want %s", b, want)
	}
}

func TestPreviewDoesNotModifyInput(t *testing.T) {
	long := strings.Repeat("z", 500)
	params := map[string]any{
		"password": previewSecret,
		"text":     long,
		"headers":  map[string]any{"Authorization": previewSecret},
		"list":     []any{map[string]any{"api_key": previewSecret}, long},
	}
	before, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	Preview(params)
	after, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Fatalf("Preview modified its input:\nbefore %s\nafter  %s", before, after)
	}
}

func TestPreviewOfNothingIsAnEmptyObject(t *testing.T) {
	if got := marshalPreview(t, nil); got != "{}" {
		t.Fatalf("Preview(nil) = %s, want {}", got)
	}
}
