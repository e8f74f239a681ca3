package atomicfile

import (
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/parslee-ai/car-server/internal/powerfs"
)

// On a file system that keeps only what was made durable, a replaced file
// (in a directory Write created) and a file opened with OpenDurable keep
// their names and what was fsynced through a power cut.
func TestWritesSurviveAPowerCut(t *testing.T) {
	fs := powerfs.MountForTest(t)
	replaced := filepath.Join(fs.Dir(), "a", "b", "token")
	for _, body := range []string{"first", "second"} {
		if err := Write(replaced, []byte(body)); err != nil {
			t.Fatal(err)
		}
		if _, err := fs.Cut(powerfs.LoseAll, rand.New(rand.NewSource(1))); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(replaced); err != nil || string(b) != body {
			t.Fatalf("after the cut: %q %v, want %q", b, err, body)
		}
	}
	logPath := filepath.Join(fs.Dir(), "c", "log")
	f, err := OpenDurable(logPath, os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString("record\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Cut(powerfs.LoseAll, rand.New(rand.NewSource(1))); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(logPath); err != nil || string(b) != "record\n" {
		t.Fatalf("the synced record after the cut: %q %v", b, err)
	}
}
