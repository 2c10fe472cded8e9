package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/purser-dev/purser/internal/storerow"
	"github.com/purser-dev/purser/internal/storesql"
)

// pgDB is the pool or a transaction as the statements both stores share
// (internal/storesql) use it.
type pgDB struct {
	q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
		Query(context.Context, string, ...any) (pgx.Rows, error)
		Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	}
}

func (d pgDB) QueryRow(ctx context.Context, query string, args ...any) storerow.Scanner {
	return d.q.QueryRow(ctx, query, args...)
}

func (d pgDB) Query(ctx context.Context, query string, args ...any) (storesql.Rows, error) {
	return d.q.Query(ctx, query, args...)
}

func (d pgDB) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := d.q.Exec(ctx, query, args...)
	return tag.RowsAffected(), err
}
