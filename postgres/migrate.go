package postgres

import (
	"context"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/purser-dev/purser/internal/migrate"
)

//go:embed migrations/*.sql
var migrations embed.FS

// line1 maps the versions this store numbered on its own (up to 015, before
// both stores shared one version line) to their numbers now: the same
// number as the same change in the SQLite store. Its 001 already held what
// SQLite's 002–006 added, and it keeps no per-call totals (009), so those
// numbers are files without statements here.
var line1 = map[int]int{
	1: 1, 2: 7, 3: 8, 4: 10, 5: 11, 6: 12, 7: 18,
	10: 13, 11: 14, 12: 15, 14: 16, 15: 17,
}

// migrate applies the migrations not yet applied, in one transaction under
// an advisory lock on the schema: processes starting at once wait for the
// first, then find nothing left to do.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrate.Load(migrations, "migrations")
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('purser migrate ' || current_schema(), 0))`); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		return migrate.Run(ctx, migrateTx{tx}, ms, line1)
	})
}

// migrateTx is the migrate loop's view of a transaction.
type migrateTx struct{ tx pgx.Tx }

func (t migrateTx) Exec(ctx context.Context, query string) error {
	_, err := t.tx.Exec(ctx, query)
	return err
}

func (t migrateTx) Ints(ctx context.Context, query string) ([][]int64, error) {
	rows, err := t.tx.Query(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return migrate.IntRows(rows, len(rows.FieldDescriptions()))
}
