package migrate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

// sqlTx is the loop's view of a database/sql transaction, as the SQLite
// store has it.
type sqlTx struct{ tx *sql.Tx }

func (t sqlTx) Exec(ctx context.Context, q string) error {
	_, err := t.tx.ExecContext(ctx, q)
	return err
}

func (t sqlTx) Ints(ctx context.Context, q string) ([][]int64, error) {
	rows, err := t.tx.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	return IntRows(rows, len(cols))
}

// run applies ms to db in one transaction, committed when Run succeeds.
func run(t *testing.T, db *sql.DB, ms []Migration, fromLine1 map[int]int) error {
	t.Helper()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := Run(ctx, sqlTx{tx}, ms, fromLine1); err != nil {
		return err
	}
	return tx.Commit()
}

func ints(t *testing.T, db *sql.DB, q string) []int64 {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var n int64
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

func memory(t *testing.T, setup ...string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1) // one in-memory database
	t.Cleanup(func() { db.Close() })
	for _, q := range setup {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return db
}

var twoMigrations = []Migration{
	{Version: 1, Name: "001_a.sql", SQL: "CREATE TABLE a (x INTEGER);"},
	{Version: 2, Name: "002_b.sql", SQL: "-- nothing here in this store\n"},
}

// A new database gets every migration, the one without statements
// recorded too, on the current line; a second run does nothing.
func TestRunNewDatabase(t *testing.T) {
	db := memory(t)
	for range 2 {
		if err := run(t, db, twoMigrations, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := ints(t, db, `SELECT version FROM schema_migrations ORDER BY version`); !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("versions %v, want [1 2]", got)
	}
	if got := ints(t, db, `SELECT line FROM schema_version_line`); !slices.Equal(got, []int64{Line}) {
		t.Errorf("line %v, want [%d]", got, Line)
	}
}

// A database of line 1 is renumbered before anything runs: a change it
// had is not run again (here 001 would fail: its table exists), and its
// applied_at is kept.
func TestRunRenumbersLine1Once(t *testing.T) {
	db := memory(t,
		`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`,
		`CREATE TABLE a (x INTEGER)`,
		`INSERT INTO schema_migrations VALUES (5, 42)`)
	if err := run(t, db, twoMigrations, map[int]int{5: 1}); err != nil {
		t.Fatal(err)
	}
	if got := ints(t, db, `SELECT version FROM schema_migrations ORDER BY version`); !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("versions %v, want [1 2]", got)
	}
	if got := ints(t, db, `SELECT applied_at FROM schema_migrations WHERE version = 1`); !slices.Equal(got, []int64{42}) {
		t.Errorf("applied_at of the renumbered version %v, want [42]", got)
	}
}

// A line-1 version the map does not know, or a line this build is not on,
// is refused, and nothing is changed.
func TestRunRefusesWhatItCannotPlace(t *testing.T) {
	db := memory(t,
		`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`,
		`INSERT INTO schema_migrations VALUES (9, 0)`)
	if err := run(t, db, twoMigrations, map[int]int{5: 1}); err == nil || !strings.Contains(err.Error(), "version 9") {
		t.Errorf("an unknown line-1 version: %v, want an error naming it", err)
	}
	if got := ints(t, db, `SELECT version FROM schema_migrations`); !slices.Equal(got, []int64{9}) {
		t.Errorf("versions after a refusal %v, want [9] untouched", got)
	}
	db = memory(t, `CREATE TABLE schema_version_line (line INTEGER NOT NULL)`, `INSERT INTO schema_version_line VALUES (3)`)
	if err := run(t, db, twoMigrations, nil); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("a database on line 3: %v, want an error naming it", err)
	}
}

// A database a newer build migrated is refused, naming both versions, and
// nothing is changed: this build would place holds its schema does not
// count.
func TestRunRefusesANewerSchema(t *testing.T) {
	db := memory(t)
	if err := run(t, db, twoMigrations, nil); err != nil {
		t.Fatal(err)
	}
	newest := int64(twoMigrations[len(twoMigrations)-1].Version) + 1
	if _, err := db.Exec(`INSERT INTO schema_migrations VALUES (?, 0)`, newest); err != nil {
		t.Fatal(err)
	}
	err := run(t, db, twoMigrations, nil)
	if !errors.Is(err, ErrNewerSchema) || !strings.Contains(err.Error(), fmt.Sprintf("version %d", newest)) {
		t.Errorf("a newer schema: %v, want ErrNewerSchema naming version %d", err, newest)
	}
}
