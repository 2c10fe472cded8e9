package sqlite_test

import (
	"context"
	"database/sql"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/internal/migrate"
	"github.com/purser-dev/purser/sqlite"
)

// A database made before migration 020 keeps its ledger (seq and all) and
// its per-call totals through the tables' rebuild; new entries follow the
// old ones in seq, and the rebuilt tables are the leaner kind (no
// AUTOINCREMENT, call_totals WITHOUT ROWID).
func TestMigration020KeepsTheLedgerAndItsOrder(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "purser.db")
	db, mustExec := databaseBefore(t, path, "migrations", 21)
	mustExec(`CREATE TABLE schema_version_line (line INTEGER NOT NULL)`)
	mustExec(`INSERT INTO schema_version_line (line) VALUES (?)`, migrate.Line)
	// Three rows with a gap in seq (as AUTOINCREMENT may leave), the call's totals.
	for i, seq := range []int{1, 2, 7} {
		mustExec(`INSERT INTO usage (seq, idem_key, task_id, run_id, call_id, iteration, kind, model, input_tokens, output_tokens, usd_nanos, cost_source, at, agent)
			VALUES (?, ?, 't', 'r', 'c1', 1, 'main', 'm', 100, 10, 5, 'reported', ?, '')`, seq, "c1/"+strconv.Itoa(i), seq)
	}
	mustExec(`INSERT INTO call_totals (call_id, model, agent, task_id, iteration, kind, first_seq, usd_nanos, tokens, cached, reported, estimated, unknown)
		VALUES ('c1', 'm', '', 't', 1, 'main', 1, 15, 330, 0, 3, 0, 0)`)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("migrating a database from before 020: %v", err)
	}
	defer s.Close()
	if err := s.AppendUsage(ctx, purser.LedgerEntry{Key: "c1/9", TaskID: "t", RunID: "r", CallID: "c1", Iteration: 1, Kind: purser.CallMain,
		Event: budget.UsageEvent{Model: "m", InputTokens: 7, USD: 1, CostSource: budget.CostReported}}); err != nil {
		t.Fatal(err)
	}
	ledger, err := s.Usage(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, e := range ledger {
		keys = append(keys, e.Key)
	}
	if strings.Join(keys, " ") != "c1/0 c1/1 c1/2 c1/9" {
		t.Fatalf("ledger after the migration: %v, want the three old entries in order, then the new one", keys)
	}
	calls, err := s.CallUsage(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || calls[0].Totals.Tokens != 337 || calls[0].Totals.USD != 16 {
		t.Fatalf("call totals after the migration: %+v, want the old 330 tokens and $15 nano plus the new entry's", calls)
	}

	db, err = sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var seq int
	if err := db.QueryRowContext(ctx, `SELECT seq FROM usage WHERE idem_key = 'c1/9'`).Scan(&seq); err != nil || seq != 8 {
		t.Fatalf("the new entry's seq: %d (%v), want 8, one past the largest", seq, err)
	}
	for table, want := range map[string]string{"usage": "AUTOINCREMENT", "call_totals": "WITHOUT ROWID"} {
		var ddl string
		if err := db.QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?`, table).Scan(&ddl); err != nil {
			t.Fatal(err)
		}
		if has := strings.Contains(ddl, want); has != (table == "call_totals") {
			t.Errorf("%s after 020: %q (has %s: %v)", table, ddl, want, has)
		}
	}
}

// databaseBefore makes the database at path as the migrations in dir (as
// numbered there) below version left it, each recorded as applied, and
// returns it open with a statement runner that fails the test.
func databaseBefore(t *testing.T, path, dir string, version int) (*sql.DB, func(q string, args ...any)) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	mustExec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	names, err := fs.Glob(os.DirFS(dir), "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	mustExec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`)
	for _, n := range names {
		if v, _ := strconv.Atoi(strings.SplitN(n, "_", 2)[0]); v < version {
			body, err := os.ReadFile(filepath.Join(dir, n))
			if err != nil {
				t.Fatal(err)
			}
			mustExec(string(body))
			mustExec(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)`, v)
		}
	}
	return db, mustExec
}
