package flow

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAnalyzeFollowsSecretsToSinks(t *testing.T) {
	labels := Defaults()
	cases := []struct {
		name    string
		steps   []Step
		tainted map[string]Taint
		leak    string // the path of the one leak expected, "" for none
	}{
		{
			name:  "a reference carries a secret to a sink",
			steps: []Step{{ID: "a", Tool: "read_secret"}, {ID: "b", Tool: "http_post", Refs: []int{0}, Deps: []int{0}}},
			leak:  "action 'a' (read_secret) → action 'b' (http_post)",
		},
		{
			name: "through a state key written in the same proposal",
			steps: []Step{
				{ID: "a", Tool: "read_secret"},
				{ID: "w", Refs: []int{0}, Deps: []int{0}, Writes: []string{"k"}},
				{ID: "r", Reads: []string{"k"}, Deps: []int{1}},
				{ID: "s", Tool: "send_email", Refs: []int{2}, Deps: []int{2}},
			},
			leak: "action 'a' (read_secret) → action 'w' → state key 'k' → action 'r' → action 's' (send_email)",
		},
		{
			name:    "through a key an earlier proposal tainted",
			steps:   []Step{{ID: "r", Reads: []string{"k"}}, {ID: "s", Tool: "http_post", Refs: []int{0}, Deps: []int{0}}},
			tainted: map[string]Taint{"k": {Labels: []string{Secret}, Origin: "proposal p1 action 'a' (read_secret)"}},
			leak:    "state key 'k' (written by proposal p1 action 'a' (read_secret)) → action 'r' → action 's' (http_post)",
		},
		{
			name:  "a sink without secret input",
			steps: []Step{{ID: "a", Tool: "read_file"}, {ID: "b", Tool: "http_post", Refs: []int{0}, Deps: []int{0}}},
		},
		{
			name:  "a dependency alone carries no data",
			steps: []Step{{ID: "a", Tool: "read_secret"}, {ID: "b", Tool: "http_post", Deps: []int{0}}},
		},
		{
			name:    "a key tainted with another label is not secret",
			steps:   []Step{{ID: "r", Reads: []string{"k"}}, {ID: "s", Tool: "http_post", Refs: []int{0}}},
			tainted: map[string]Taint{"k": {Labels: []string{"private"}, Origin: "x"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := Analyze(Input{Steps: tc.steps, Labels: labels, Tainted: tc.tainted})
			if tc.leak == "" {
				if len(rep.Leaks) != 0 {
					t.Fatalf("leaks = %v, want none", rep.Leaks)
				}
				return
			}
			if len(rep.Leaks) != 1 || rep.Leaks[0].String() != tc.leak {
				t.Fatalf("leaks = %v, want [%s]", rep.Leaks, tc.leak)
			}
		})
	}
}

func TestAnalyzeLabelsEveryStepItReaches(t *testing.T) {
	steps := []Step{{ID: "a", Tool: "read_secret"}, {ID: "w", Refs: []int{0}, Writes: []string{"k"}}, {ID: "c", Tool: "read_file"}}
	rep := Analyze(Input{Steps: steps, Labels: Defaults()})
	if got := rep.StepLabels(1); len(got) != 1 || got[0] != Secret {
		t.Fatalf("labels of w = %v, want [secret]", got)
	}
	if got := rep.StepLabels(2); got != nil {
		t.Fatalf("labels of c = %v, want none", got)
	}
}

func TestOrderings(t *testing.T) {
	labels := Defaults()
	labels.Orderings = []Ordering{{First: "read_private_notes", Then: "send_email"}}
	cases := []struct {
		name  string
		steps []Step
		ran   map[string]bool
		hits  []string // step ids escalated
	}{
		{"then after first", []Step{{ID: "n", Tool: "read_private_notes"}, {ID: "e", Tool: "send_email", Deps: []int{0}}}, nil, []string{"e"}},
		{"unordered", []Step{{ID: "n", Tool: "read_private_notes"}, {ID: "e", Tool: "send_email"}}, nil, []string{"e"}},
		{"then strictly before first", []Step{{ID: "e", Tool: "send_email"}, {ID: "n", Tool: "read_private_notes", Deps: []int{0}}}, nil, nil},
		{"first ran in an earlier proposal", []Step{{ID: "e", Tool: "send_email"}}, map[string]bool{"read_private_notes": true}, []string{"e"}},
		{"no first anywhere", []Step{{ID: "e", Tool: "send_email"}}, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := Analyze(Input{Steps: tc.steps, Labels: labels, Ran: tc.ran})
			var got []string
			for _, h := range rep.Orderings {
				got = append(got, tc.steps[h.Step].ID)
			}
			if strings.Join(got, ",") != strings.Join(tc.hits, ",") {
				t.Fatalf("escalated %v, want %v", got, tc.hits)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	missing, err := Load(filepath.Join(dir, "absent.json"))
	if err != nil || !missing.Tools["http_post"].Sink || !missing.Tools["read_secret"].Source {
		t.Fatalf("a missing file must give the defaults: %+v, %v", missing, err)
	}
	cases := []struct {
		name, body, wantErr string
	}{
		{"merged over defaults", `{"tools": {"read_notes": {"source": true, "labels": ["secret"]}, "http_post": {}}, "orderings": [{"first": "a", "then": "b"}]}`, ""},
		{"unknown key", `{"tools": {}, "sinks": ["x"]}`, `unknown field "sinks"`},
		{"unknown tool key", `{"tools": {"x": {"sink": true, "exfil": 1}}}`, `unknown field "exfil"`},
		{"not JSON", `{"tools": `, "unexpected EOF"},
		{"ordering without then", `{"orderings": [{"first": "a"}]}`, `orderings[0] needs both`},
		{"labels on a non-source", `{"tools": {"x": {"labels": ["secret"]}}}`, "not a source"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "tool-labels.json")
			if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			l, err := Load(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path) {
					t.Fatalf("error = %v, want one naming %s and saying %q", err, path, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !l.Tools["read_notes"].Source || l.Tools["http_post"].Sink || !l.Tools["send_email"].Sink || len(l.Orderings) != 1 {
				t.Fatalf("merge went wrong: %+v", l)
			}
		})
	}
}
