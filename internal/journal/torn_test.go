package journal

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The shapes a power loss can leave at the end of a journal: the lost
// pages of the last write read as zero bytes, and the file may end inside
// it. Each is cut off at Open, never refused; Verify and Read report the
// same cut without changing the file.
func TestTornTailsAreCutOff(t *testing.T) {
	a, b := string(rec("a", "put", 1))+"\n", string(rec("b", "put", 2))+"\n"
	zeros := func(n int) string { return strings.Repeat("\x00", n) }
	cases := []struct {
		name string
		tail string // after a and b, both acknowledged
	}{
		{"bytes after the last newline", `{"key":"c","op":"pu`},
		{"a run of zero bytes", zeros(4096)},
		{"a line of zero bytes, then a newline", zeros(100) + "\n"},
		{"an earlier page lost, the record's end survived", zeros(50) + `,"op":"put","v":3}` + "\n"},
		{"a record's end lost inside it", `{"key":"c","op":"put","v":` + zeros(30) + "\n"},
		{"a hole, then whole records of the same write", zeros(20) + "\n" + string(rec("d", "put", 4)) + "\n" + string(rec("e", "put", 5)) + "\n"},
		{"a hole, a record, another hole and a fragment", zeros(20) + "\n" + string(rec("d", "put", 4)) + "\n" + zeros(9) + "}\n" + `{"key":"f"`},
		{"a final line that is not JSON", `{"key":"c","op":"put","v":}` + "\n"},
		{"zero bytes after the last newline", zeros(7)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j.jsonl")
			if err := os.WriteFile(path, []byte(a+b+tc.tail), 0o600); err != nil {
				t.Fatal(err)
			}
			vrep, err := Verify(path)
			if err != nil || vrep.TruncatedBytes != len(tc.tail) || vrep.Lines != 2 || vrep.Live != 2 {
				t.Fatalf("Verify: %+v %v, want 2 records and %d torn bytes", vrep, err, len(tc.tail))
			}
			var keys []string
			if _, err := Read(path, func(key string, _ []byte) { keys = append(keys, key) }); err != nil || strings.Join(keys, ",") != "a,b" {
				t.Fatalf("Read: %q %v, want a,b", keys, err)
			}
			j, rep, err := Open(path)
			if err != nil {
				t.Fatalf("Open refused a torn tail: %v", err)
			}
			if rep.TruncatedBytes != len(tc.tail) || rep.Live != 2 {
				t.Fatalf("Open: %+v, want 2 live records and %d torn bytes", rep, len(tc.tail))
			}
			if err := j.Append(rec("g", "put", 7)); err != nil {
				t.Fatal(err)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(path)
			if want := a + b + string(rec("g", "put", 7)) + "\n"; err != nil || string(data) != want {
				t.Fatalf("file after recovery:\n%q\nwant\n%q", data, want)
			}
		})
	}
}

// A damaged line that no torn write can leave, followed by more of the
// file, is corruption: Open refuses it, naming the line, and changes
// nothing.
func TestCorruptLinesBeforeTheTailStillRefuse(t *testing.T) {
	a := string(rec("a", "put", 1)) + "\n"
	cases := []struct{ name, body, want string }{
		{"a bad line without a zero byte, then a record", a + "not json\n" + a, "line 2: not a JSON object"},
		{"a bad line without a zero byte, then a fragment", a + "not json\n" + `{"key"`, "line 2: not a JSON object"},
		{"a hole, then a bad line without a zero byte", a + "\x00\x00\n" + "not json\n" + a, "line 3 after it is unreadable too"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j.jsonl")
			if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := Verify(path); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Verify: %v, want %q", err, tc.want)
			}
			_, _, err := Open(path)
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: %v, want an error naming %s and %q", err, path, tc.want)
			}
			if data, _ := os.ReadFile(path); !bytes.Equal(data, []byte(tc.body)) {
				t.Fatal("a refused journal was modified")
			}
		})
	}
}
