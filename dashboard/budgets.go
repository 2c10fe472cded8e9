package dashboard

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/report"
)

// namedReader is what the page needs of a store to show the named budgets'
// tree; a store without named budgets shows none.
type namedReader interface {
	NamedBudgetList(ctx context.Context) ([]purser.NamedBudget, error)
	NamedBudgetStatus(ctx context.Context, name string, now time.Time) (purser.NamedBudgetStatus, error)
}

// budgetsEvery is how often the tree is read again. A node's spend is a sum
// over its window's ledger, not a running total, so the tree is read at
// most this often however many pages watch and however often they poll.
const budgetsEvery = 2 * time.Second

// budgetTree keeps the last tree read and when.
type budgetTree struct {
	mu   sync.Mutex
	at   time.Time
	tree []report.BudgetTreeJSON
}

// get returns the tree of the store's named budgets, read again when the
// last read is older than budgetsEvery.
func (b *budgetTree) get(ctx context.Context, store purser.StoreReader, now time.Time) ([]report.BudgetTreeJSON, error) {
	nr, ok := store.(namedReader)
	if !ok {
		return []report.BudgetTreeJSON{}, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tree != nil && now.Sub(b.at) < budgetsEvery {
		return b.tree, nil
	}
	list, err := nr.NamedBudgetList(ctx)
	if err != nil {
		return nil, fmt.Errorf("read named budgets: %w", err)
	}
	sts := make([]purser.NamedBudgetStatus, 0, len(list))
	for _, nb := range list {
		st, err := nr.NamedBudgetStatus(ctx, nb.Name, now)
		if err != nil {
			return nil, fmt.Errorf("read named budget %s: %w", nb.Name, err)
		}
		sts = append(sts, st)
	}
	b.tree, b.at = report.BudgetTree(sts), now
	return b.tree, nil
}
