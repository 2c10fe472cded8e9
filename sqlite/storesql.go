package sqlite

import (
	"context"
	"database/sql"

	"github.com/purser-dev/purser/internal/storerow"
	"github.com/purser-dev/purser/internal/storesql"
)

// sqlDB is a handle or transaction as the statements both stores share
// (internal/storesql) use it.
type sqlDB struct {
	q interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
		QueryContext(context.Context, string, ...any) (*sql.Rows, error)
		ExecContext(context.Context, string, ...any) (sql.Result, error)
	}
}

func (d sqlDB) QueryRow(ctx context.Context, query string, args ...any) storerow.Scanner {
	return d.q.QueryRowContext(ctx, query, args...)
}

func (d sqlDB) Query(ctx context.Context, query string, args ...any) (storesql.Rows, error) {
	rows, err := d.q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

func (d sqlDB) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := d.q.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }
