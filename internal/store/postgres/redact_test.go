package postgres

import (
	"strings"
	"testing"
	"time"
)

// A keyword/value connection string is redacted from what pgx parsed of
// it, quoted values and all.
func TestRedactKeywordValue(t *testing.T) {
	t.Setenv("PGPORT", "") // the wanted ports are libpq's default
	for in, want := range map[string]string{
		"host=db.example port=5433 user=car dbname=cars password=s3cret-kv sslmode=disable": "host=db.example port=5433 user=car dbname=cars password=xxxxx",
		"host=db.example user=car password='s3cret kv' dbname=cars":                         "host=db.example port=5432 user=car dbname=cars password=xxxxx",
		"password=s3cret-kv host=a.example,b.example user=car dbname=cars":                  "host=a.example,b.example port=5432 user=car dbname=cars password=xxxxx",
		"host=db.example user=car dbname=cars":                                              "host=db.example port=5432 user=car dbname=cars",
		"host=db.example password=s3cret-kv bogus":                                          "(an unparsable postgres_url)",
	} {
		got := Redact(in)
		if got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
		if strings.Contains(got, "s3cret") {
			t.Errorf("Redact(%q) shows the password: %q", in, got)
		}
	}
}

// An unreachable database named by a keyword/value string fails with a
// message that shows neither the password nor the string's password field.
func TestUnreachableRedactsKeywordValuePassword(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{
		"host=127.0.0.1 port=1 user=car dbname=car password=s3cret-kv sslmode=disable",
		"host=127.0.0.1 port=1 user=car dbname=car password=s3cret-kv sslmode=disable bogus",
	} {
		_, err := Open(ctxT(t), Config{URL: dsn, Node: "n1", ConnectTimeout: 2 * time.Second})
		if err == nil {
			t.Fatalf("Open(%q) succeeded", dsn)
		}
		if strings.Contains(err.Error(), "s3cret-kv") {
			t.Errorf("error shows the password: %v", err)
		}
	}
}
