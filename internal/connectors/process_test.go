package connectors

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// lineLimit lets a line of max bytes through, refuses max+1, and counts
// each line afresh, however the reads split it.
func TestLineLimit(t *testing.T) {
	cases := []struct {
		in   string
		over bool
	}{
		{"abcd\nabcd\n", false},
		{"abcde\n", true},
		{"abcd\nab\nabcde", true},
		{"\n\n\nabcd", false},
	}
	for _, tc := range cases {
		for _, split := range []bool{false, true} {
			var r io.Reader = strings.NewReader(tc.in)
			if split {
				r = iotest.OneByteReader(r)
			}
			hit := false
			_, err := io.ReadAll(&lineLimit{r: r, max: 4, over: func() { hit = true }})
			if got := errors.Is(err, errTooLarge); got != tc.over || hit != tc.over {
				t.Errorf("%q (one byte a read: %v): error %v, over %v; want over %v", tc.in, split, err, hit, tc.over)
			}
		}
	}
}
