package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/sqlite"
)

// A database made before migration 017 (as numbered then, in
// testdata/line1; 013 now) keeps its ledger and per-call totals through it:
// the old usage is the main agent's, and new usage is kept per agent beside
// it.
func TestMigration017KeepsTheLedgerAsTheMainAgents(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "purser.db")
	db, mustExec := databaseBefore(t, path, "testdata/line1", 17)
	at := time.Now().UnixNano()
	mustExec(`INSERT INTO usage (idem_key, task_id, run_id, call_id, iteration, kind, model, input_tokens, output_tokens, cache_read, cache_write, reasoning, usd_nanos, cost_source, elapsed_ns, iteration_end, at, price_source, settles_unknown)
		VALUES ('c1/1', 't', 'r', 'c1', 1, 'main', 'm', 100, 10, 0, 0, 0, 5, 'reported', 0, 0, ?, '', 0)`, at)
	mustExec(`INSERT INTO call_totals (call_id, model, task_id, iteration, kind, first_seq, usd_nanos, tokens, cached, reported, estimated, unknown, list_usd_nanos, list_events)
		VALUES ('c1', 'm', 't', 1, 'main', 1, 5, 110, 0, 1, 0, 0, 0, 0)`)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("migrating a database from before 017: %v", err)
	}
	defer s.Close()
	if err := s.AppendUsage(ctx,
		purser.LedgerEntry{Key: "c1/2", TaskID: "t", RunID: "r", CallID: "c1", Iteration: 1, Kind: purser.CallMain,
			Event: budget.UsageEvent{Model: "m", InputTokens: 7, USD: 1, CostSource: budget.CostReported}},
		purser.LedgerEntry{Key: "c1/3", TaskID: "t", RunID: "r", CallID: "c1", Iteration: 1, Kind: purser.CallMain,
			Event: budget.UsageEvent{Model: "m", InputTokens: 3, USD: 2, CostSource: budget.CostReported, Agent: "Explore"}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.CallUsage(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Agent != "" || got[0].Totals.Tokens != 117 || got[0].Totals.USD != 6 ||
		got[1].Agent != "Explore" || got[1].Totals.Tokens != 3 || got[1].Totals.USD != 2 {
		t.Errorf("CallUsage after 017 = %+v, want the old row grown by the main agent's new usage (117 tokens, 6 nano$) and Explore's apart (3, 2)", got)
	}
	ledger, err := s.Usage(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(ledger) != 3 || ledger[0].Event.Agent != "" || ledger[2].Event.Agent != "Explore" {
		t.Errorf("ledger after 017 = %+v", ledger)
	}
}
