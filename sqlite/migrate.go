package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

	"github.com/purser-dev/purser/internal/migrate"
)

//go:embed migrations/*.sql
var migrations embed.FS

// line1 maps the versions this store numbered on its own (up to 025, before
// both stores shared one version line) to their numbers now. The order of
// the changes is unchanged; only the gaps closed.
var line1 = map[int]int{
	1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6, 7: 7, 8: 8,
	10: 9, 11: 10, 12: 11, 13: 12, 17: 13, 18: 14, 19: 15, 21: 16, 22: 17, 25: 18,
}

// migrate applies the migrations not yet applied, all in one IMMEDIATE
// transaction: it takes the write lock first (waiting for it), so processes
// opening a new database at once migrate it once, and none fails on a lock
// upgrade.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrate.Load(migrations, "migrations")
	if err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil) // _txlock=immediate
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	if err := migrate.Run(ctx, migrateTx{tx}, ms, line1); err != nil {
		return err
	}
	return tx.Commit()
}

// migrateTx is the migrate loop's view of a transaction.
type migrateTx struct{ tx *sql.Tx }

func (t migrateTx) Exec(ctx context.Context, query string) error {
	_, err := t.tx.ExecContext(ctx, query)
	return err
}

func (t migrateTx) Ints(ctx context.Context, query string) ([][]int64, error) {
	rows, err := t.tx.QueryContext(ctx, query)
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
