package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"

	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/internal/atomicfile"
	"github.com/parslee-ai/car-server/internal/host"
)

// Approval requests a stop interrupted. At shutdown the requests still
// waiting for a person are written to a file; the next start shows them on
// the desk as expired, "daemon restarted", with their fingerprint and
// preview, so that a person can still approve the operation for the
// agent's resubmission. The file is read once and removed.

// restartedReason is the notes of a request a restart interrupted.
const restartedReason = "expired: daemon restarted"

// saveInterrupted writes the requests pending at shutdown to path (nothing
// when there are none).
func saveInterrupted(path string, pending []host.Approval, log *zap.Logger) {
	if len(pending) == 0 {
		return
	}
	data, err := json.Marshal(pending)
	if err == nil {
		err = atomicfile.Write(path, data)
	}
	if err != nil {
		log.Warn("the approval requests pending at shutdown could not be kept for the next start", zap.String("file", path), zap.Int("requests", len(pending)), zap.Error(err))
		return
	}
	log.Info("approval requests pending at shutdown kept for the next start", zap.String("file", path), zap.Int("requests", len(pending)))
}

// restoreInterrupted puts the requests a previous stop interrupted on the
// desk as expired, and removes the file. A file that cannot be read is
// logged and removed: it is history, not state the daemon needs.
func restoreInterrupted(path string, desk *host.Registry, log *zap.Logger) {
	data, err := atomicfile.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var pending []host.Approval
	if err == nil {
		err = json.Unmarshal(data, &pending)
	}
	if err != nil {
		log.Warn("the approval requests of the previous stop could not be read; they are not shown", zap.String("file", path), zap.Error(err))
	} else {
		desk.Restore(pending, restartedReason)
		log.Info("approval requests the previous stop interrupted are listed as expired", zap.Int("requests", len(pending)))
	}
	if err := os.Remove(path); err != nil {
		log.Warn("remove the file of interrupted approval requests", zap.String("file", path), zap.Error(err))
	}
}
