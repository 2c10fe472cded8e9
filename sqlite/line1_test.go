package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/purser-dev/purser/internal/migrate"
	"github.com/purser-dev/purser/storetest"
)

// A database that builds before the shared version line wrote (the
// migrations as then numbered, up to 025, in testdata/line1) opens and
// reaches the latest version with its records, and ends with the same
// tables and indexes as a database made new.
func TestDatabaseOfLine1Migrates(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "purser.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	latest, err := filepath.Glob("migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	storetest.MigratesFromLine1(t, storetest.Line1{
		Migrations: os.DirFS("testdata/line1"),
		Latest:     len(latest),
		Exec: func(q string) error {
			_, err := db.Exec(q)
			return err
		},
		Ints: func(q string) ([][]int64, error) { return ints(db, q) },
		Open: func(t *testing.T) storetest.Store { return open(t, path) },
	})
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	open(t, fresh)
	if got, want := schema(t, path), schema(t, fresh); !slices.Equal(got, want) {
		t.Errorf("schema after migrating:\n%q\nwant a new database's:\n%q", got, want)
	}
}

// schema lists the database's tables and indexes as created, without the
// migrate loop's own bookkeeping.
func schema(t *testing.T, path string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(context.Background(), `SELECT type || ' ' || name || ': ' || COALESCE(sql, '') FROM sqlite_master
		WHERE name NOT LIKE 'schema_%' AND name NOT LIKE 'sqlite_%' ORDER BY type, name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func ints(db *sql.DB, q string) ([][]int64, error) {
	rows, err := db.Query(q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	return migrate.IntRows(rows, len(cols))
}
