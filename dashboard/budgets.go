package dashboard

import (
	"context"
	"sync"
	"time"

	"github.com/purser-dev/purser/report"
)

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
func (b *budgetTree) get(ctx context.Context, store any, now time.Time) ([]report.BudgetTreeJSON, error) {
	nr, ok := store.(report.NamedBudgetReader)
	if !ok || nr == nil {
		return []report.BudgetTreeJSON{}, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tree != nil && now.Sub(b.at) < budgetsEvery {
		return b.tree, nil
	}
	tree, err := report.ReadBudgetTree(ctx, nr, now)
	if err != nil {
		return nil, err
	}
	b.tree, b.at = tree, now
	return b.tree, nil
}

// namedReader is where the tree is read: Options.Budgets, else the store.
func (h *handler) namedReader() any {
	if h.o.Budgets != nil {
		return h.o.Budgets
	}
	return h.store
}
