package jsonvalue

import (
	"strings"
	"testing"
)

func TestDepth(t *testing.T) {
	for _, c := range []struct {
		text string
		want int
	}{
		{`1`, 0},
		{`{}`, 1},
		{`{"a":[1,{"b":[]}]}`, 4},
		{`["[[[{{{", "\"[", "\\"]`, 1},  // brackets in strings, escaped quotes
		{`[[[`, 3},                      // not valid JSON: still measured
		{`{"a":"]]]]` + "\n" + `[[`, 1}, // an unclosed string hides the rest
		{strings.Repeat("[", 10001) + strings.Repeat("]", 10001), 10001},
	} {
		if got := Depth([]byte(c.text)); got != c.want {
			t.Errorf("Depth(%.40q) = %d, want %d", c.text, got, c.want)
		}
	}
}

func TestNumbersFitFloat64(t *testing.T) {
	for _, c := range []struct {
		text string
		want bool
	}{
		{`{"a":[1,-2.5,3e10,1E308]}`, true},
		{`1e309`, false},
		{`[-1e309]`, false},
		{`{"a":"1e999"}`, true},          // a string, not a number
		{`["\"", 1e400]`, false},         // after an escaped quote the scan is outside the string again
		{strings.Repeat("9", 300), true}, // 300 digits fit
		{strings.Repeat("9", 310), false},
		{`1e-400`, true}, // underflows to zero, which float64 holds
	} {
		if got := NumbersFitFloat64([]byte(c.text)); got != c.want {
			t.Errorf("NumbersFitFloat64(%.40q) = %v, want %v", c.text, got, c.want)
		}
	}
}
