package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/postgres"
	"github.com/purser-dev/purser/sqlite"
)

// store is what the commands work through: the records, the run budget
// the processes sharing the database share, and the alert outbox.
type store interface {
	purser.Store
	purser.SharedRunBudget
	purser.NamedBudgets
	purser.AlertOutbox
}

// openStore opens the database db names, by its form: a postgres:// or
// postgresql:// URL is a PostgreSQL database, anything else a SQLite file.
// With create false (reading commands) a database Purser never set up is an
// error matching os.ErrNotExist rather than a new one.
func openStore(ctx context.Context, db database, create bool) (store, error) {
	switch {
	case postgres.IsURL(db.Path) && create:
		return openedOrNil(postgres.Open(ctx, db.Path))
	case postgres.IsURL(db.Path):
		return openedOrNil(postgres.OpenExisting(ctx, db.Path))
	case create:
		return openedOrNil(sqlite.OpenWith(ctx, db.Path, sqlite.Options{Durability: db.Durability}))
	default:
		return openedOrNil(sqlite.OpenExisting(ctx, db.Path))
	}
}

// openedOrNil keeps a typed nil store from passing for an open one.
func openedOrNil[S store](s S, err error) (store, error) {
	if err != nil {
		return nil, err
	}
	return s, nil
}

// isDatabaseFile says whether the database is a file on this machine (and
// so could sit inside a workspace), not a server's.
func isDatabaseFile(path string) bool { return !postgres.IsURL(path) }

// shownDatabase is a database's location fit to print: a URL's password is
// masked.
func shownDatabase(path string) string {
	if postgres.IsURL(path) {
		return postgres.Redact(path)
	}
	return path
}

// errNoDatabase says a reading command found no database where it looked.
func errNoDatabase(db database, err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return badInput(fmt.Errorf("no database at %s: nothing has run here yet (give --db or PURSER_DB to read another)", db))
	}
	return err
}
