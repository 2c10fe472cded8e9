// Package storesql is the SQL both stores run as one text: statements
// written in the syntax PostgreSQL and SQLite share, with $N placeholders,
// which pgx binds by number and modernc's SQLite driver binds to the Nth
// argument as well. It holds what used to be written twice, once per
// dialect: the named budgets' readers and a task's raise. Each store keeps
// its own transactions and locking (it passes the transaction, and for a
// raise the lock its dialect takes) and adapts its handle to DB, as
// internal/migrate's loop takes each store's transaction.
package storesql

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/internal/storerow"
)

// DB is a store's handle or transaction, as the shared statements use it.
type DB interface {
	QueryRow(ctx context.Context, query string, args ...any) storerow.Scanner
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	// Exec runs a statement and returns how many rows it changed.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
}

// Rows is a result set the caller closes.
type Rows interface {
	storerow.Rows
	Close()
}

// Collect runs query on db and scans each row with scan; what names the
// rows in an error.
func Collect[T any](ctx context.Context, db DB, what string, scan func(storerow.Scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := db.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	out, err := storerow.Collect(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// Nanos is a time as a SQL literal of Unix nanoseconds, for a store whose
// clock is the host's (SQLite) where PostgreSQL reads the server's.
func Nanos(t time.Time) string { return strconv.FormatInt(storerow.Nanos(t), 10) }

// RaiseTask moves a task's recorded budget, records the change and queues
// its BLOCKED job again, inside the caller's transaction db; lock is what
// the store's dialect adds to the read of the task's row to keep a second
// raise out until this one commits (" FOR UPDATE"; "" where the
// transaction already holds the write lock). It reports whether a job was
// queued again.
func RaiseTask(ctx context.Context, db DB, c purser.BudgetChange, lock string) (bool, error) {
	from, to, err := storerow.BudgetChangeJSON(c.From, c.To)
	if err != nil {
		return false, err
	}
	var was string
	if err := db.QueryRow(ctx, `SELECT budget_json FROM tasks WHERE id = $1`+lock, c.TaskID).Scan(&was); err != nil {
		return false, storerow.NotFound(err)
	}
	if err := storerow.CheckRaise(c, was, from); err != nil {
		return false, err
	}
	if _, err := db.Exec(ctx, `UPDATE tasks SET budget_json = $1, updated_at = $2 WHERE id = $3`, to, storerow.Nanos(c.At), c.TaskID); err != nil {
		return false, err
	}
	if _, err := db.Exec(ctx, `INSERT INTO budget_changes (task_id, at, by_whom, source, from_json, to_json) VALUES ($1, $2, $3, $4, $5, $6)`,
		c.TaskID, storerow.Nanos(c.At), c.By, c.Source, from, to); err != nil {
		return false, err
	}
	n, err := db.Exec(ctx, `UPDATE jobs SET state = 'queued', outcome = '', worker = '', lease_until = 0, not_before = 0, finished_at = 0
		WHERE task_id = $1 AND state = 'finished' AND outcome = $2`, c.TaskID, string(purser.StateBlocked))
	if err != nil {
		return false, fmt.Errorf("queue it again: %w", err)
	}
	return n > 0, nil
}
