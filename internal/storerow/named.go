package storerow

import (
	"cmp"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// NamedBudgetColumns are the columns of a named budget, in the order
// NamedBudgetValues gives them and ScanNamedBudget reads them.
const NamedBudgetColumns = `name, budget_json, win, zone, created_at, parent`

// NamedBudgetValues are b's NamedBudgetColumns as stored, once b is valid
// (a store refuses to record one that is not); created at the zero time,
// it is created now.
func NamedBudgetValues(b purser.NamedBudget) ([]any, error) {
	if err := b.Validate(); err != nil {
		return nil, fmt.Errorf("named budget %s: %w", b.Name, err)
	}
	cfg, err := json.Marshal(b.Budget)
	if err != nil {
		return nil, fmt.Errorf("named budget %s: %w", b.Name, err)
	}
	if b.CreatedAt.IsZero() {
		b.CreatedAt = time.Now()
	}
	return []any{b.Name, string(cfg), string(b.Window), b.Zone, Nanos(b.CreatedAt), b.Parent}, nil
}

// ScanNamedBudget reads a named budget's NamedBudgetColumns.
func ScanNamedBudget(r Scanner) (purser.NamedBudget, error) {
	var b purser.NamedBudget
	var cfg, win string
	var created sql.NullInt64
	if err := r.Scan(&b.Name, &cfg, &win, &b.Zone, &created, &b.Parent); err != nil {
		return b, err
	}
	if err := json.Unmarshal([]byte(cfg), &b.Budget); err != nil {
		return b, fmt.Errorf("named budget %s: %w", b.Name, err)
	}
	b.Window, b.CreatedAt = purser.BudgetWindow(win), FromNanos(created)
	return b, nil
}

// NamedBudget reads the row a store looked named budget name up by: its
// NamedBudgetColumns, or no row, which is an error matching
// purser.ErrNotFound (pgx.ErrNoRows matches sql.ErrNoRows).
func NamedBudget(r Scanner, name string) (purser.NamedBudget, error) {
	b, err := ScanNamedBudget(r)
	if errors.Is(err, sql.ErrNoRows) {
		return purser.NamedBudget{Name: name}, fmt.Errorf("named budget %s: %w", name, purser.ErrNotFound)
	}
	if err != nil {
		return b, fmt.Errorf("named budget %s: %w", name, err)
	}
	return b, nil
}

// RaiseJSON checks that b, raised to r.To, is still a valid named budget
// (a store refuses a raise that is not), and gives the raise's two budgets
// as stored.
func RaiseJSON(b purser.NamedBudget, r purser.NamedBudgetRaise) (from, to string, err error) {
	b.Budget = r.To
	if err := b.Validate(); err != nil {
		return "", "", fmt.Errorf("named budget %s: %w", r.Name, err)
	}
	return BudgetChangeJSON(r.From, r.To)
}

// ScanBudgetRaise reads a named budget's raise: the BudgetChangeColumns
// of named_budget_raises, which hold a raise as budget_changes hold a
// task's budget change.
func ScanBudgetRaise(r Scanner, name string) (purser.NamedBudgetRaise, error) {
	c, err := ScanBudgetChange(r, name)
	return purser.NamedBudgetRaise{Name: name, At: c.At, By: c.By, Source: c.Source, From: c.From, To: c.To}, err
}

// ScanNamedSpend reads what a named budget's status query adds up: the
// window's dollars and tokens, and the dollars and tokens its unexpired
// holds take, into st.
func ScanNamedSpend(r Scanner, st *purser.NamedBudgetStatus) error {
	var usd, tokens, heldUSD, heldTokens int64
	if err := r.Scan(&usd, &tokens, &heldUSD, &heldTokens); err != nil {
		return fmt.Errorf("named budget %s spend: %w", st.Name, err)
	}
	st.Spent.USD, st.Spent.Tokens = budget.USD(usd), tokens
	st.Held = budget.Amount{USD: budget.USD(heldUSD), Tokens: heldTokens}
	return nil
}

// ScanString reads a row of one text column (a name, a run's ID).
func ScanString(r Scanner) (string, error) {
	var s string
	err := r.Scan(&s)
	return s, err
}

// TreeNodes is every budget in names and every ancestor of theirs, each
// once, by their parents (as both stores read them), roots first (then by
// name): the budgets a hold drawing from names is placed on, in the order
// their refusals are reported, so that the budget nearest the root is the
// one named when several are short. A missing one matches
// purser.ErrNotFound.
func TreeNodes(parents map[string]string, names []string) ([]string, error) {
	depth := map[string]int{}
	for _, n := range names {
		up, err := purser.Lineage(parents, n)
		if err != nil {
			return nil, err
		}
		for i, a := range up {
			depth[a] = len(up) - 1 - i
		}
	}
	out := make([]string, 0, len(depth))
	for n := range depth {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b string) int {
		if c := cmp.Compare(depth[a], depth[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return out, nil
}

// ParentMoveSource is what a named budget's raise record says of a move
// to another parent: the move, and where it was asked from.
func ParentMoveSource(from, to, source string) string {
	root := func(p string) string {
		if p == "" {
			return "(root)"
		}
		return p
	}
	return fmt.Sprintf("parent %s → %s; %s", root(from), root(to), source)
}

// NotFound is err, matching purser.ErrNotFound as well when it says no row
// was found (pgx.ErrNoRows matches sql.ErrNoRows).
func NotFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: %w", purser.ErrNotFound, err)
	}
	return err
}

// CheckRaise is what both stores check before a task's raise: its
// recorded budget (was, as stored) is still the one the raise was made
// from (from, as BudgetChangeJSON gives it).
func CheckRaise(c purser.BudgetChange, was, from string) error {
	var stored budget.Config
	if err := json.Unmarshal([]byte(was), &stored); err != nil {
		return err
	}
	if now, err := json.Marshal(stored); err != nil || string(now) != from {
		return purser.ErrBudgetMoved
	}
	return nil
}

// RootsFirst orders the budgets of parents (each one's parent, "" for a
// root) roots first, then by name, as RunDraws lists them: a budget whose
// parent is not among them counts as a root, and a loop ends the climb.
func RootsFirst(parents map[string]string) []string {
	depth := func(n string) int {
		d := 0
		for seen := map[string]bool{n: true}; ; d++ {
			p, ok := parents[n]
			if !ok || p == "" || seen[p] {
				return d
			}
			if _, known := parents[p]; !known {
				return d
			}
			seen[p], n = true, p
		}
	}
	out := make([]string, 0, len(parents))
	depths := map[string]int{}
	for n := range parents {
		out = append(out, n)
		depths[n] = depth(n)
	}
	slices.SortFunc(out, func(a, b string) int {
		if c := cmp.Compare(depths[a], depths[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return out
}
