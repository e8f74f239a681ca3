package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is the checkout's root, from this package's directory.
var repoRoot = filepath.Join("..", "..")

// The README is what a newcomer reads in five minutes: short, with the two
// commands, how to choose a port and a home, a first client, and where to
// read next.
func TestTheReadmeIsAGuide(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if n := strings.Count(text, "\n"); n > 350 {
		t.Errorf("README.md is %d lines; keep it under 350 and move references to docs/", n)
	}
	for _, want := range []string{"make run", "make test", "--port", "## A first client", "```python", "## Where to read next", "(docs/"} {
		if !strings.Contains(text, want) {
			t.Errorf("README.md lacks %q", want)
		}
	}
}

// The README's first client runs as written against a daemon and prints
// what the README says it prints.
func TestTheReadmesFirstClientRuns(t *testing.T) {
	py := python(t)
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, _ := strings.Cut(string(b), "## A first client")
	_, code, ok := strings.Cut(after, "```python\n")
	if !ok {
		t.Fatal("README.md has no python block under ## A first client")
	}
	code, _, _ = strings.Cut(code, "```")
	prog := filepath.Join(t.TempDir(), "first.py")
	if err := os.WriteFile(prog, []byte(code), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, t.TempDir())
	cmd := exec.Command(py, prog)
	cmd.Env = append(os.Environ(), "CAR_URL=ws://"+d.addr+"/", "CAR_TOKEN_FILE="+filepath.Join(d.home, "ai.parslee.car", "auth-token"))
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "succeeded {'echo': 'hello'}" {
		t.Fatalf("the README's client: %v\n%s", err, out)
	}
}

// mdLink is a Markdown link's target: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// Every relative link in README.md, BENCHMARKS.md and docs/ names a file
// that exists, and every #anchor a heading of its file.
func TestDocumentLinksResolve(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	files = append(files, filepath.Join(repoRoot, "README.md"), filepath.Join(repoRoot, "BENCHMARKS.md"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			dest := f
			if path != "" {
				dest = filepath.Join(filepath.Dir(f), path)
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: link %q: %v", f, target, err)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(dest, ".md") && !hasAnchor(t, dest, anchor) {
				t.Errorf("%s: link %q: %s has no heading with that anchor", f, target, dest)
			}
		}
	}
}

// hasAnchor reports whether a heading of the Markdown file md makes anchor.
func hasAnchor(t *testing.T, md, anchor string) bool {
	b, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range headings(string(b)) {
		if anchorOf(h.text) == anchor {
			return true
		}
	}
	return false
}

// heading is one Markdown heading: its level (number of #) and text.
type heading struct {
	level int
	text  string
}

// headings are the headings of a Markdown text, outside code fences.
func headings(md string) []heading {
	var out []heading
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		level := len(line) - len(strings.TrimLeft(line, "#"))
		out = append(out, heading{level, strings.TrimSpace(line[level:])})
	}
	return out
}

// anchorOf is the anchor GitHub makes of a heading: lower case, spaces to
// dashes, punctuation dropped.
func anchorOf(text string) string {
	var a strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			a.WriteRune('-')
		case r == '-' || r == '_' || 'a' <= r && r <= 'z' || '0' <= r && r <= '9' || r > 127:
			a.WriteRune(r)
		}
	}
	return a.String()
}

// The contents block every document in docs/ opens with, between these
// markers, after its first paragraph.
const (
	contentsStart = "<!-- contents -->"
	contentsEnd   = "<!-- /contents -->"
)

// contentsOf is the contents block of a document: a link to each ## and
// ### heading, in order.
func contentsOf(md string) string {
	var b strings.Builder
	b.WriteString(contentsStart + "\n**Contents**\n\n")
	for _, h := range headings(md) {
		if h.level < 2 || h.level > 3 {
			continue
		}
		b.WriteString(strings.Repeat("  ", h.level-2) + "- [" + h.text + "](#" + anchorOf(h.text) + ")\n")
	}
	return b.String() + contentsEnd
}

// Every document in docs/ opens with a contents block that lists its
// sections. CAR_UPDATE_CONTENTS=1 writes the blocks.
func TestDocsHaveContents(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		want := contentsOf(text)
		start, end := strings.Index(text, contentsStart), strings.Index(text, contentsEnd)
		if start >= 0 && end > start && text[start:end+len(contentsEnd)] == want {
			continue
		}
		if os.Getenv("CAR_UPDATE_CONTENTS") != "1" {
			t.Errorf("%s: its contents block is missing or stale; run CAR_UPDATE_CONTENTS=1 go test -run TestDocsHaveContents ./cmd/car-server/", f)
			continue
		}
		if start >= 0 && end > start {
			text = text[:start] + want + text[end+len(contentsEnd):]
		} else {
			// After the title and the paragraph under it.
			_, rest, _ := strings.Cut(text, "\n\n")
			para, tail, _ := strings.Cut(rest, "\n\n")
			text = text[:len(text)-len(rest)] + para + "\n\n" + want + "\n\n" + tail
		}
		if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
