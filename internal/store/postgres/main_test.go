package postgres

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			println("goleak:", err.Error())
			code = 1
		}
	}
	os.Exit(code)
}
