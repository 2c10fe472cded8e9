package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/postgres"
	"github.com/purser-dev/purser/postgres/pgtest"
)

// namedAdmissions runs b.N admissions on the workers' pools, each with its
// own, and reports their latencies.
func namedAdmissions(b *testing.B, pools []*postgres.Store, admit func(s *postgres.Store) (func(), error)) {
	admissions(b, len(pools), func(w int) (func(), error) { return admit(pools[w]) })
}

func namedCaps() budget.Config {
	usd, tokens := budget.Dollars(1_000_000), int64(1<<50)
	return budget.Config{Hard: budget.HardLimits{USD: &usd, Tokens: &tokens}}
}

// Admission on four named budgets, by N workers at once: one hold per
// budget, each its own transaction (how a run drawing from four budgets was
// admitted before the tree), against one hold on the leaf of a four-level
// tree (org → team → repository → run), every level in one transaction.
func BenchmarkFleetNamedAdmission(b *testing.B) {
	levels := []string{"org", "team", "repo", "run"}
	for _, n := range fleetSizes {
		b.Run(fmt.Sprintf("per-budget/workers=%d", n), func(b *testing.B) {
			pools := openPools(b, pgtest.NewSchema(b), n)
			ctx := context.Background()
			for _, l := range levels {
				if err := pools[0].CreateBudget(ctx, purser.NamedBudget{Name: l, Window: purser.WindowMonth, Budget: namedCaps()}); err != nil {
					b.Fatal(err)
				}
			}
			namedAdmissions(b, pools, func(s *postgres.Store) (func(), error) {
				var releases []func()
				for _, l := range levels {
					r, err := s.ReserveNamed(ctx, l, purser.Holder{}, budget.Amount{Tokens: 1000}, time.Now(), time.Minute)
					if err != nil {
						return nil, err
					}
					releases = append(releases, r)
				}
				return func() {
					for _, r := range releases {
						r()
					}
				}, nil
			})
		})
		b.Run(fmt.Sprintf("tree/workers=%d", n), func(b *testing.B) {
			pools := openPools(b, pgtest.NewSchema(b), n)
			ctx := context.Background()
			parent := ""
			for _, l := range levels {
				if err := pools[0].CreateBudget(ctx, purser.NamedBudget{Name: l, Parent: parent, Window: purser.WindowMonth, Budget: namedCaps()}); err != nil {
					b.Fatal(err)
				}
				parent = l
			}
			namedAdmissions(b, pools, func(s *postgres.Store) (func(), error) {
				return s.ReserveNamedAll(ctx, []string{"run"}, purser.Holder{}, budget.Amount{Tokens: 1000}, time.Now(), time.Minute)
			})
		})
	}
}
