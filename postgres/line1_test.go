package postgres_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/purser-dev/purser/storetest"
)

// A database that builds before the shared version line wrote (the
// migrations as then numbered, up to 015, in testdata/line1) opens and
// reaches the latest version with its records, and ends with the same
// columns and indexes as a database made new.
func TestDatabaseOfLine1Migrates(t *testing.T) {
	ctx := context.Background()
	dbURL := newSchema(t)
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	latest, err := filepath.Glob("migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	storetest.MigratesFromLine1(t, storetest.Line1{
		Migrations: os.DirFS("testdata/line1"),
		Latest:     len(latest),
		Exec: func(q string) error {
			_, err := conn.Exec(ctx, q)
			return err
		},
		Ints: func(q string) ([][]int64, error) {
			rows, err := conn.Query(ctx, q)
			if err != nil {
				return nil, err
			}
			return pgx.CollectRows(rows, func(r pgx.CollectableRow) ([]int64, error) {
				row := make([]int64, len(r.FieldDescriptions()))
				ptrs := make([]any, len(row))
				for i := range row {
					ptrs[i] = &row[i]
				}
				return row, r.Scan(ptrs...)
			})
		},
		Open: func(t *testing.T) storetest.Store { return open(t, dbURL) },
	})
	fresh := newSchema(t)
	open(t, fresh)
	if got, want := schema(t, dbURL), schema(t, fresh); !slices.Equal(got, want) {
		t.Errorf("schema after migrating:\n%q\nwant a new database's:\n%q", got, want)
	}
}

// schema lists the columns and indexes of the database's tables, without
// the migrate loop's own bookkeeping.
func schema(t *testing.T, dbURL string) []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `
		SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' ||
			regexp_replace(COALESCE(column_default, ''), '^nextval.*$', 'serial')
		FROM information_schema.columns WHERE table_schema = current_schema() AND table_name NOT LIKE 'schema_%'
		UNION ALL
		SELECT 'index ' || indexname || ': ' || replace(indexdef, current_schema() || '.', '')
		FROM pg_indexes WHERE schemaname = current_schema() AND tablename NOT LIKE 'schema_%'
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}
