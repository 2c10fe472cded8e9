// Package pgtest gives tests a PostgreSQL database of their own: a fresh
// schema on the server PURSER_TEST_POSTGRES names (.ci/run starts one),
// dropped when the test ends, so tests run in parallel on one server.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

// EnvVar names the variable holding the test server's URL.
const EnvVar = "PURSER_TEST_POSTGRES"

// ServerURL returns the test server's URL, or skips the test, saying why,
// when there is none.
func ServerURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvVar)
	if u == "" {
		t.Skip(EnvVar + " is not set: no PostgreSQL server to test against (.ci/run starts one with .ci/postgres.sh)")
	}
	return u
}

// NewSchema makes an empty schema for one test and returns a URL whose
// connections work in it (search_path); the schema is dropped when the test
// ends.
func NewSchema(t testing.TB) string {
	t.Helper()
	base := ServerURL(t)
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	schema := "purser_test_" + hex.EncodeToString(b)
	exec(t, base, `CREATE SCHEMA `+schema)
	t.Cleanup(func() { exec(t, base, `DROP SCHEMA `+schema+` CASCADE`) })
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", EnvVar, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func exec(t testing.TB, dbURL, sql string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("connect to the test server: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
