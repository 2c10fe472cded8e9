package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/postgres"
	"github.com/purser-dev/purser/postgres/pgtest"
)

// A named hold waits for its tree's root lock, the first hold on a tree (a
// transaction that reads the budgets) as much as a later one (one batch,
// from the budgets remembered): both are decided one at a time with every
// other hold on the tree.
func TestNamedHoldTakesItsRootsLock(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.NewSchema(t)
	s, err := postgres.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	usd, tokens := budget.Dollars(100), int64(10_000)
	for _, b := range []purser.NamedBudget{{Name: "org"}, {Name: "team", Parent: "org"}} {
		b.Window, b.Budget = purser.WindowMonth, budget.Config{Hard: budget.HardLimits{USD: &usd, Tokens: &tokens}}
		if err := s.CreateBudget(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	other, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	for _, path := range []string{"first hold (a transaction)", "later hold (one batch)"} {
		if _, err := other.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended('purser named budget ' || current_schema() || ' org', 0))`); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := s.ReserveNamed(ctx, "team", purser.Holder{}, budget.Amount{Tokens: 1}, time.Now(), time.Hour)
			done <- err
		}()
		select {
		case err := <-done:
			t.Fatalf("%s: decided while another session held org's lock (%v)", path, err)
		case <-time.After(300 * time.Millisecond):
		}
		if _, err := other.Exec(ctx, `SELECT pg_advisory_unlock(hashtextextended('purser named budget ' || current_schema() || ' org', 0))`); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
}
