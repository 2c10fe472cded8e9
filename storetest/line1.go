package storetest

import (
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// Line1 is a database as builds before the stores shared one version line
// left it, for MigratesFromLine1.
type Line1 struct {
	// Migrations are the store's migration files as they were numbered
	// then (a copy kept in the store's testdata).
	Migrations fs.FS
	// Latest is the version the store's migrations reach now.
	Latest int
	// Exec runs statements on the database, around the store.
	Exec func(query string) error
	// Ints runs a query whose columns are integers, around the store.
	Ints func(query string) ([][]int64, error)
	// Open opens the database with the store under test.
	Open func(t *testing.T) Store
}

// line1Seed is a little of every kind of record, written as the builds of
// line 1 wrote it; the statements are ones both dialects accept.
var line1Seed = []string{
	`INSERT INTO runs (id, budget_json, created_at) VALUES ('r1', '{}', 1000)`,
	`INSERT INTO tasks (id, run_id, goal, workspace, file, budget_json, state, reason, elapsed_ns, owner, created_at, updated_at)
		VALUES ('t1', 'r1', 'fix the bug', '/w', 'task.yaml', '{}', 'DONE', 'validators passed', 5, '', 1000, 2000)`,
	`INSERT INTO usage (idem_key, task_id, run_id, call_id, iteration, kind, model, input_tokens, output_tokens, usd_nanos, cost_source, at)
		VALUES ('c1/1', 't1', 'r1', 'c1', 1, 'main', 'm', 100, 10, 500, 'reported', 1500)`,
	`INSERT INTO usage_totals (scope, id, usd_nanos, tokens, iterations, reported, estimated, unknown) VALUES ('task', 't1', 500, 110, 1, 1, 0, 0)`,
	`INSERT INTO usage_totals (scope, id, usd_nanos, tokens, iterations, reported, estimated, unknown) VALUES ('run', 'r1', 500, 110, 1, 1, 0, 0)`,
	`INSERT INTO named_budgets (name, budget_json, win, zone, created_at) VALUES ('team', '{}', 'month', '', 1000)`,
	`INSERT INTO run_draws (run_id, name) VALUES ('r1', 'team')`,
	`INSERT INTO jobs (task_id, run_id, task_file, submitted_at) VALUES ('t2', 'r1', '/w/t2.yaml', 1000)`,
	`INSERT INTO alert_outbox (id, webhook, kind, task_id, body, created_at) VALUES ('a1', 'ops', 'hard', 't1', 'hello', 1000)`,
}

// MigratesFromLine1 builds a database with the store's migrations as
// numbered before the stores shared one version line, applied as those
// builds' migrate loop applied them, writes records into it, and opens it
// with the store under test: it must reach the latest version with no
// change run twice or skipped, and every record still read back.
func MigratesFromLine1(t *testing.T, l Line1) {
	t.Helper()
	names, err := fs.Glob(l.Migrations, "*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("line 1 migrations: %v (%d files)", err, len(names))
	}
	sort.Strings(names)
	exec := func(q string) {
		t.Helper()
		if err := l.Exec(q); err != nil {
			t.Fatalf("%.70s: %v", q, err)
		}
	}
	exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)`)
	for _, n := range names {
		v, err := strconv.Atoi(strings.SplitN(n, "_", 2)[0])
		if err != nil {
			t.Fatal(err)
		}
		body, err := fs.ReadFile(l.Migrations, n)
		if err != nil {
			t.Fatal(err)
		}
		exec(string(body))
		exec(fmt.Sprintf(`INSERT INTO schema_migrations (version, applied_at) VALUES (%d, %d)`, v, 1000+v))
	}
	for _, q := range line1Seed {
		exec(q)
	}

	for i := range 2 { // the second open finds nothing left to do
		s := l.Open(t)
		checkLine1Records(t, s, 1+i)
		rows, err := l.Ints(`SELECT version FROM schema_migrations ORDER BY version`)
		if err != nil {
			t.Fatal(err)
		}
		var got, want []int64
		for _, r := range rows {
			got = append(got, r[0])
		}
		for v := 1; v <= l.Latest; v++ {
			want = append(want, int64(v))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("versions after migrating = %v, want %v", got, want)
		}
		if lines, err := l.Ints(`SELECT line FROM schema_version_line`); err != nil || len(lines) != 1 || lines[0][0] != 2 {
			t.Fatalf("version line = %v (%v), want one row, 2", lines, err)
		}
	}
}

// checkLine1Records reads back line1Seed's records; the ledger holds
// entries of them, the seed's first.
func checkLine1Records(t *testing.T, s Store, entries int) {
	t.Helper()
	ctx := t.Context()
	task, err := s.Task(ctx, "t1")
	if err != nil || task.RunID != "r1" || task.Goal != "fix the bug" || task.State != purser.StateDone || task.Elapsed != 5 {
		t.Fatalf("task after migrating = %+v, %v", task, err)
	}
	ledger, err := s.Usage(ctx, "t1")
	if err != nil || len(ledger) != entries || ledger[0].Key != "c1/1" || ledger[0].Event.USD != 500 || ledger[0].Event.InputTokens != 100 {
		t.Fatalf("ledger after migrating = %+v, %v", ledger, err)
	}
	// Each open but the first finds the entry the one before appended.
	if tot, err := s.RunUsageTotals(ctx, "r1"); err != nil || tot.USD != budget.USD(499+entries) || tot.Tokens != int64(109+entries) || tot.ReportedEvents != int64(entries) {
		t.Fatalf("run totals after migrating = %+v, %v", tot, err)
	}
	// The migrated ledger still grows.
	if err := s.AppendUsage(ctx, purser.LedgerEntry{Key: "c1/2", TaskID: "t1", RunID: "r1", CallID: "c1", Iteration: 1, Kind: purser.CallMain,
		Event: budget.UsageEvent{Model: "m", InputTokens: 1, USD: 1, CostSource: budget.CostReported}}); err != nil {
		t.Fatal(err)
	}
	if tot, err := s.UsageTotals(ctx, "t1"); err != nil || tot.USD != 501 || tot.Tokens != 111 {
		t.Fatalf("task totals after an append = %+v, %v", tot, err)
	}
	nb, err := s.NamedBudget(ctx, "team")
	if err != nil || nb.Window != purser.WindowMonth {
		t.Fatalf("named budget after migrating = %+v, %v", nb, err)
	}
	if draws, err := s.RunDraws(ctx, "r1"); err != nil || !slices.Equal(draws, []string{"team"}) {
		t.Fatalf("run draws after migrating = %v, %v", draws, err)
	}
	alerts, err := s.OutboxAlerts(ctx)
	if err != nil || len(alerts) != 1 || alerts[0].ID != "a1" || string(alerts[0].Body) != "hello" || alerts[0].State != purser.OutboxPending {
		t.Fatalf("outbox after migrating = %+v, %v", alerts, err)
	}
	q, ok := s.(purser.JobQueue)
	if !ok {
		t.Fatalf("%T is no purser.JobQueue", s)
	}
	jobs, err := q.Jobs(ctx, "r1")
	if err != nil || len(jobs) != 1 || jobs[0].TaskID != "t2" || jobs[0].State != purser.JobQueued {
		t.Fatalf("jobs after migrating = %+v, %v", jobs, err)
	}
}
