package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/postgres"
	"github.com/purser-dev/purser/sqlite"
)

// Store is what the commands work through: the records, the run budget
// the processes sharing the database share, the named budgets and the
// alert outbox.
type Store interface {
	purser.Store
	purser.SharedRunBudget
	purser.NamedBudgets
	purser.AlertOutbox
}

// JobStore is a store workers take tasks from: on PostgreSQL, workers on
// many hosts; on a SQLite file, workers on the machine that holds it.
type JobStore interface {
	Store
	purser.JobQueue
}

// Database is the database a command uses, and the rule that chose it.
type Database struct {
	Path string
	From string // which rule: --db, PURSER_DB, purser.yaml's database:, or the default
	// Durability is purser.yaml's durability: for a SQLite file, what a
	// committed entry survives.
	Durability sqlite.Durability
}

func (d Database) String() string { return ShownDatabase(d.Path) + " (" + d.From + ")" }

// IsFile says whether the database is a file on this machine (and so could
// sit inside a workspace), not a server's.
func (d Database) IsFile() bool { return !postgres.IsURL(d.Path) }

// DBFlagHelp is the --db flag's help: the one rule that finds the database.
const DBFlagHelp = "database: a SQLite file path or a postgres:// URL (default: $PURSER_DB, else purser.yaml's database:, else the project's folder in $XDG_STATE_HOME/purser)"

// LocateDatabase applies the one rule that finds the database: --db, then
// PURSER_DB, then purser.yaml's database:, then the project's default (in
// the user's state directory, outside every workspace).
func LocateDatabase(flag string, proj *config.Project) Database {
	db := Database{Path: proj.Database, From: "the default for the project in " + proj.Dir, Durability: sqlite.Durability(proj.Durability)}
	switch {
	case flag != "":
		db.Path, db.From = flag, "--db"
	case os.Getenv("PURSER_DB") != "":
		db.Path, db.From = os.Getenv("PURSER_DB"), "PURSER_DB"
	case proj.DatabaseSet:
		db.From = "database: in " + proj.File
	}
	return db
}

// OpenStore opens the database db names, by its form: a postgres:// or
// postgresql:// URL is a PostgreSQL database, anything else a SQLite file.
// With create false (reading commands) a database Purser never set up is an
// error matching os.ErrNotExist rather than a new one.
func OpenStore(ctx context.Context, db Database, create bool) (Store, error) {
	if err := refuseKeywordDSN(db); err != nil {
		return nil, err
	}
	switch {
	case postgres.IsURL(db.Path) && create:
		return openedOrNil(postgres.Open(ctx, db.Path))
	case postgres.IsURL(db.Path):
		return openedOrNil(postgres.OpenExisting(ctx, db.Path))
	case create:
		return openedOrNil(sqlite.OpenWith(ctx, db.Path, sqlite.Options{Durability: db.Durability}))
	default:
		// As sqlite.OpenExisting, but with purser.yaml's durability: a
		// worker opens an existing database and writes the ledger to it.
		fi, err := os.Stat(db.Path)
		if err != nil {
			return nil, fmt.Errorf("open database %s: %w", db.Path, err)
		}
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("open database %s: not a regular file", db.Path)
		}
		return openedOrNil(sqlite.OpenWith(ctx, db.Path, sqlite.Options{Durability: db.Durability}))
	}
}

// openedOrNil keeps a typed nil store from passing for an open one.
func openedOrNil[S Store](s S, err error) (Store, error) {
	if err != nil {
		return nil, err
	}
	return s, nil
}

// ShownDatabase is a database's location fit to print: a URL's password is
// masked, and so is a keyword/value connection string's.
func ShownDatabase(path string) string {
	switch {
	case postgres.IsURL(path):
		return postgres.Redact(path)
	case isKeywordDSN(path):
		return keywordPassword.ReplaceAllString(path, "${1}xxxxx")
	}
	return path
}

// libpq's connection keywords
// (https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-PARAMKEYWORDS),
// those a keyword/value connection string is all but sure to hold one of.
var keywordDSN = regexp.MustCompile(`(?i)(^|\s)(host|hostaddr|port|dbname|user|password|passfile|sslmode|sslrootcert|service|connect_timeout|application_name|options|target_session_attrs)\s*=`)

// keywordPassword is a password in a keyword/value connection string: a
// quoted value (with \' and \\ escapes) or a word.
var keywordPassword = regexp.MustCompile(`(?i)((?:^|\s)password\s*=\s*)('(?:[^'\\]|\\.)*'?|\S*)`)

// isKeywordDSN says whether path is a libpq keyword/value connection string
// (host=db user=app password=…) rather than a file name: taken as a SQLite
// file, it would create a file named with the password and print it.
func isKeywordDSN(path string) bool { return !postgres.IsURL(path) && keywordDSN.MatchString(path) }

// ErrKeywordDSN is the error for a keyword/value connection string given
// as the database: Purser takes PostgreSQL as a URL.
var ErrKeywordDSN = errors.New("a PostgreSQL keyword/value connection string, not a file; Purser takes PostgreSQL as a URL: postgres://user:password@host:5432/dbname?sslmode=require")

// refuseKeywordDSN refuses db when it is a keyword/value connection string,
// showing it with its password masked, before anything is made of it.
func refuseKeywordDSN(db Database) error {
	if !isKeywordDSN(db.Path) {
		return nil
	}
	return BadInput(fmt.Errorf("database %s: %w", db, ErrKeywordDSN))
}

// refuseNetworkQueue refuses a SQLite file on a network filesystem for the
// job queue: hosts would share it with neither a lock SQLite can trust nor
// one clock for the leases. command names the command refused.
func refuseNetworkQueue(command string, db Database) error {
	if !db.IsFile() {
		return nil
	}
	if fs, remote := networkFilesystem(db.Path); remote {
		return BadInput(fmt.Errorf("%s: %s is on a network filesystem (%s); a SQLite queue serves workers on the machine that holds the file, not across hosts. Keep the file on a local disk, or share a PostgreSQL database (a postgres:// URL in --db, PURSER_DB or database: in purser.yaml) between hosts", command, db, fs))
	}
	return nil
}
