package report

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// BudgetTreeJSON is a named budget and the budgets under it, as `budgets
// tree --json` prints them: each node's window, spend, holds and tier, and
// its headroom — what a new hold could take there, its ancestors' caps
// counted, so that a child whose own cap is larger than what its parent has
// left shows the parent's.
type BudgetTreeJSON struct {
	NamedBudgetJSON
	Parent string `json:"parent"`
	// HeadroomUSD and HeadroomTokens are what fits under this budget and
	// every ancestor's caps (omitted where nothing caps the metric).
	HeadroomUSD    *json.Number `json:"headroomUsd,omitempty"`
	HeadroomTokens *int64       `json:"headroomTokens,omitempty"`
	// Summary is the node in words, as budgets tree prints it after its
	// name and tier: its window, spend against its caps, holds and room.
	Summary  string           `json:"summary"`
	Children []BudgetTreeJSON `json:"children"`

	room, spent budget.Amount // as the text shows them
}

// NamedBudgetReader is what reading the tree needs of a store.
type NamedBudgetReader interface {
	NamedBudgetList(ctx context.Context) ([]purser.NamedBudget, error)
	NamedBudgetStatus(ctx context.Context, name string, now time.Time) (purser.NamedBudgetStatus, error)
}

// ReadBudgetTree reads every named budget's status at now and arranges
// them as their tree (BudgetTree), for budgets tree and the dashboard.
func ReadBudgetTree(ctx context.Context, r NamedBudgetReader, now time.Time) ([]BudgetTreeJSON, error) {
	list, err := r.NamedBudgetList(ctx)
	if err != nil {
		return nil, fmt.Errorf("read named budgets: %w", err)
	}
	sts := make([]purser.NamedBudgetStatus, 0, len(list))
	for _, b := range list {
		st, err := r.NamedBudgetStatus(ctx, b.Name, now)
		if err != nil {
			return nil, fmt.Errorf("read named budget %s: %w", b.Name, err)
		}
		sts = append(sts, st)
	}
	return BudgetTree(sts), nil
}

// BudgetTree arranges the statuses of named budgets as their tree: roots by
// name, each budget's children by name. A status whose parent is not among
// them is shown as a root.
func BudgetTree(sts []purser.NamedBudgetStatus) []BudgetTreeJSON {
	byName := map[string]purser.NamedBudgetStatus{}
	kids := map[string][]string{}
	for _, st := range sts {
		byName[st.Name] = st
	}
	var roots []string
	for _, st := range sts {
		if _, ok := byName[st.Parent]; ok && st.Parent != st.Name {
			kids[st.Parent] = append(kids[st.Parent], st.Name)
		} else {
			roots = append(roots, st.Name)
		}
	}
	var build func(name string, above budget.Amount, seen []string) BudgetTreeJSON
	build = func(name string, above budget.Amount, seen []string) BudgetTreeJSON {
		st := byName[name]
		room := above.Min(st.Headroom())
		n := BudgetTreeJSON{NamedBudgetJSON: NamedBudgetView(st, nil), Parent: st.Parent, Children: []BudgetTreeJSON{}, room: room, spent: st.Spent.Amount()}
		if room.USD != budget.UnlimitedUSD {
			s := json.Number(room.USD.Decimal())
			n.HeadroomUSD = &s
		}
		if room.Tokens != budget.Unlimited.Tokens {
			t := room.Tokens
			n.HeadroomTokens = &t
		}
		n.Summary = n.summary()
		cs := kids[name]
		slices.Sort(cs)
		for _, c := range cs {
			if !slices.Contains(seen, c) { // a loop in the records is shown once
				n.Children = append(n.Children, build(c, room, append(seen, c)))
			}
		}
		return n
	}
	slices.Sort(roots)
	out := []BudgetTreeJSON{}
	for _, r := range roots {
		out = append(out, build(r, budget.Unlimited, []string{r}))
	}
	return out
}

// WriteBudgetTree prints the tree for people: one line per budget, indented
// under its parent, with its tier, window, spend against its caps, holds of
// calls in flight and what a new hold could take there.
func WriteBudgetTree(w io.Writer, roots []BudgetTreeJSON) {
	var write func(n BudgetTreeJSON, indent, branch string)
	write = func(n BudgetTreeJSON, indent, branch string) {
		fmt.Fprintf(w, "%s%s%s  %s  %s\n", indent, branch, n.Name, strings.ToUpper(n.Tier), n.Summary)
		next := indent
		switch branch {
		case "├─ ":
			next += "│  "
		case "└─ ":
			next += "   "
		}
		for i, c := range n.Children {
			b := "├─ "
			if i == len(n.Children)-1 {
				b = "└─ "
			}
			write(c, next, b)
		}
	}
	for _, r := range roots {
		write(r, "", "")
	}
}

// summary says a node's window, its spend against its caps, the holds of
// calls in flight and what a new hold could take there.
func (n BudgetTreeJSON) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "per %s%s: spent %s, %d tokens of %s", n.Window, ZoneText(n.Zone), n.spent.USD, n.SpentTokens, CapsText(budget.CapsOf(n.Budget)))
	if n.HeldTokens > 0 || n.HeldUSD != "0" {
		fmt.Fprintf(&b, "; held $%s, %d tokens", n.HeldUSD, n.HeldTokens)
	}
	var room []string
	if n.HeadroomUSD != nil {
		room = append(room, n.room.USD.String())
	}
	if n.HeadroomTokens != nil {
		room = append(room, fmt.Sprintf("%d tokens", *n.HeadroomTokens))
	}
	if len(room) > 0 {
		fmt.Fprintf(&b, "; room %s", strings.Join(room, ", "))
	}
	return b.String()
}
