// Package migrate is the one migrate loop of Purser's stores. Each store
// embeds its migrations (NNN_name.sql, one version line: the same number is
// the same change in every store) and runs the loop inside its own
// transaction and lock; the loop only sees a Tx that executes SQL and reads
// integers, so the dialects stay in the stores.
//
// The loop records applied versions in schema_migrations and which version
// line they are numbered on in schema_version_line. Line 1 is the numbering
// each store had before the stores shared one (SQLite up to 025, PostgreSQL
// up to 015); a database on line 1 is renumbered to the current line once,
// through the store's map, before anything is applied, so that no change
// runs twice and none is skipped.
package migrate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Line is the version line the stores' migrations are numbered on now.
const Line = 2

// Tx is one store's transaction, as the loop needs it. The store begins it
// holding whatever lock makes concurrent openers migrate once, and commits
// it when Run returns nil.
type Tx interface {
	// Exec runs statements (a migration's body, or the loop's own
	// bookkeeping, which is plain SQL both dialects accept).
	Exec(ctx context.Context, query string) error
	// Ints runs a query and returns its rows, each of integer columns.
	Ints(ctx context.Context, query string) ([][]int64, error)
}

// Migration is one embedded migration file.
type Migration struct {
	Version int
	Name    string // the file's base name
	SQL     string
}

// NoOp says whether the migration has no statements: a number the store
// keeps only so that its line matches the other stores' (the change is
// already in its 001, or does not apply to it).
func (m Migration) NoOp() bool {
	for _, line := range strings.Split(m.SQL, "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "--") {
			return false
		}
	}
	return true
}

// Load reads the migrations in dir of fsys, in version order. A name that
// does not start with its version, or two files with one version, is an
// error: the second would never be applied.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	names, err := fs.Glob(fsys, dir+"/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []Migration
	seen := map[int]string{}
	for _, name := range names {
		base := name[strings.LastIndexByte(name, '/')+1:]
		version, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil || version <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with its version number", base)
		}
		if other, ok := seen[version]; ok {
			return nil, fmt.Errorf("migrations %s and %s share version %d", other, base, version)
		}
		seen[version] = base
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: version, Name: base, SQL: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	return ms, nil
}

// Run applies, in tx, the migrations not yet applied. fromLine1 maps each
// version the store numbered on line 1 to its number now; a database whose
// versions are on line 1 is renumbered through it first.
func Run(ctx context.Context, tx Tx, ms []Migration, fromLine1 map[int]int) error {
	if err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("schema_migrations: %w", err)
	}
	if err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version_line (line INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("schema_version_line: %w", err)
	}
	rows, err := tx.Ints(ctx, `SELECT version, applied_at FROM schema_migrations ORDER BY version`)
	if err != nil {
		return fmt.Errorf("schema_migrations: %w", err)
	}
	lines, err := tx.Ints(ctx, `SELECT line FROM schema_version_line`)
	if err != nil {
		return fmt.Errorf("schema_version_line: %w", err)
	}
	switch {
	case len(lines) > 1:
		return errors.New("schema_version_line: more than one row")
	case len(lines) == 1 && lines[0][0] != Line:
		return fmt.Errorf("the database is on version line %d, this build on %d", lines[0][0], Line)
	case len(lines) == 0:
		// Recorded without a line: written before the stores shared one
		// (or new, with nothing recorded yet).
		if rows, err = renumber(ctx, tx, rows, fromLine1); err != nil {
			return err
		}
		if err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO schema_version_line (line) VALUES (%d)`, Line)); err != nil {
			return fmt.Errorf("schema_version_line: %w", err)
		}
	}
	applied := map[int64]bool{}
	for _, r := range rows {
		applied[r[0]] = true
	}
	if err := newerThan(rows, ms); err != nil {
		return err
	}
	for _, m := range ms {
		if applied[int64(m.Version)] {
			continue
		}
		if !m.NoOp() {
			if err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
		}
		if err := record(ctx, tx, int64(m.Version), time.Now().UnixNano()); err != nil {
			return err
		}
	}
	return nil
}

// ErrNewerSchema is matched by a database a newer Purser has migrated: this
// build would write rows its schema does not expect (a run's holds kept
// beside its spend, say), so it refuses to open it rather than corrupt the
// budget's accounting for the processes that understand it.
var ErrNewerSchema = errors.New("the database was migrated by a newer purser")

// newerThan refuses a database with a version this build does not know.
func newerThan(rows [][]int64, ms []Migration) error {
	if len(rows) == 0 || len(ms) == 0 {
		return nil
	}
	known := int64(ms[len(ms)-1].Version)
	if newest := rows[len(rows)-1][0]; newest > known {
		return fmt.Errorf("%w: its schema is at version %d, this build knows up to %d; upgrade purser on this machine (every process sharing the database must run the same schema)",
			ErrNewerSchema, newest, known)
	}
	return nil
}

// renumber moves the recorded versions from line 1 to the current line,
// keeping when each was applied, and returns them renumbered.
func renumber(ctx context.Context, tx Tx, rows [][]int64, fromLine1 map[int]int) ([][]int64, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	moved := make([][]int64, 0, len(rows))
	for _, r := range rows {
		to, ok := fromLine1[int(r[0])]
		if !ok {
			return nil, fmt.Errorf("schema_migrations: version %d is not one this build knows (numbered before the stores shared one version line)", r[0])
		}
		moved = append(moved, []int64{int64(to), r[1]})
	}
	// All at once, not one UPDATE each: an old number can be another
	// change's new one.
	if err := tx.Exec(ctx, `DELETE FROM schema_migrations`); err != nil {
		return nil, fmt.Errorf("schema_migrations: %w", err)
	}
	for _, r := range moved {
		if err := record(ctx, tx, r[0], r[1]); err != nil {
			return nil, err
		}
	}
	return moved, nil
}

func record(ctx context.Context, tx Tx, version, at int64) error {
	if err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO schema_migrations (version, applied_at) VALUES (%d, %d)`, version, at)); err != nil {
		return fmt.Errorf("schema_migrations: record version %d: %w", version, err)
	}
	return nil
}

// Rows is a result set as a store's driver gives it, for IntRows.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// IntRows reads every row of rows, each of cols integer columns: a Tx's
// Ints over its driver's rows. The caller closes rows.
func IntRows(rows Rows, cols int) ([][]int64, error) {
	var out [][]int64
	for rows.Next() {
		row := make([]int64, cols)
		ptrs := make([]any, cols)
		for i := range row {
			ptrs[i] = &row[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		out = append(out, row)
	}
	return out, rows.Err()
}
