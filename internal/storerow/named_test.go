package storerow

import (
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// row is a stored row as a Scanner: it assigns its values, as a driver
// would, to string, int64 and sql.NullInt64 destinations.
type row struct {
	vals []any
	err  error
}

func (r row) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	if len(dest) != len(r.vals) {
		return fmt.Errorf("%d destinations for %d columns", len(dest), len(r.vals))
	}
	for i, d := range dest {
		switch d := d.(type) {
		case *string:
			*d = r.vals[i].(string)
		case *sql.NullInt64:
			*d = sql.NullInt64{Int64: r.vals[i].(int64), Valid: true}
		default:
			return fmt.Errorf("column %d: destination %T", i, d)
		}
	}
	return nil
}

// A named budget reads back as stored, created now when it had no time; an
// invalid one is not stored; no row is ErrNotFound; a raise to an invalid
// budget is refused.
func TestNamedBudgetRow(t *testing.T) {
	usd := budget.Dollars(50)
	b := purser.NamedBudget{Name: "team", Budget: budget.Config{Hard: budget.HardLimits{USD: &usd}}, Window: purser.WindowMonth, Zone: "Europe/Berlin"}
	before := time.Now()
	vals, err := NamedBudgetValues(b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := NamedBudget(row{vals: vals}, "team")
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "team" || got.Window != purser.WindowMonth || got.Zone != "Europe/Berlin" || got.Budget.Hard.USD == nil || *got.Budget.Hard.USD != usd ||
		got.CreatedAt.Before(before) {
		t.Fatalf("read back %+v", got)
	}
	if _, err := NamedBudgetValues(purser.NamedBudget{Name: "bad name", Budget: b.Budget, Window: purser.WindowDay}); err == nil {
		t.Fatal("an invalid named budget was given values to store")
	}
	if _, err := NamedBudget(row{err: sql.ErrNoRows}, "nope"); !errors.Is(err, purser.ErrNotFound) {
		t.Fatalf("no row: %v, want ErrNotFound", err)
	}
	if _, _, err := RaiseJSON(got, purser.NamedBudgetRaise{Name: "team", From: got.Budget}); err == nil {
		t.Fatal("a raise to a budget without a hard cap was accepted")
	}
}
