package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// NamedBudgetJSON is a named budget as `budgets show --json` prints it.
type NamedBudgetJSON struct {
	Name        string                 `json:"name"`
	Window      purser.BudgetWindow    `json:"window"`
	Zone        string                 `json:"zone"`
	WindowStart time.Time              `json:"windowStart"`
	WindowEnd   time.Time              `json:"windowEnd"`
	Tier        string                 `json:"tier"`
	Budget      budget.Config          `json:"budget"`
	SpentUSD    json.Number            `json:"spentUsd"`
	SpentTokens int64                  `json:"spentTokens"`
	HeldUSD     json.Number            `json:"heldUsd"`
	HeldTokens  int64                  `json:"heldTokens"`
	Runs        []string               `json:"runs"`
	Raises      []NamedBudgetRaiseJSON `json:"raises"`
}

// NamedBudgetRaiseJSON is one raise of a named budget.
type NamedBudgetRaiseJSON struct {
	At     time.Time     `json:"at"`
	By     string        `json:"by"`
	Source string        `json:"source"`
	From   budget.Config `json:"from"`
	To     budget.Config `json:"to"`
}

// WriteNamedBudget prints a named budget for people.
func WriteNamedBudget(w io.Writer, j NamedBudgetJSON) {
	fmt.Fprintf(w, "%s  %s  (per %s%s, %s to %s)\n", j.Name, strings.ToUpper(j.Tier), j.Window, ZoneText(j.Zone),
		j.WindowStart.Format(time.RFC3339), j.WindowEnd.Format(time.RFC3339))
	fmt.Fprintf(w, "  spent  $%s, %d tokens of %s\n", j.SpentUSD, j.SpentTokens, CapsText(budget.CapsOf(j.Budget)))
	if j.HeldTokens > 0 || j.HeldUSD != "0" {
		fmt.Fprintf(w, "  held by calls in flight  $%s, %d tokens\n", j.HeldUSD, j.HeldTokens)
	}
	runs := "none"
	if len(j.Runs) > 0 {
		runs = strings.Join(j.Runs, ", ")
	}
	fmt.Fprintf(w, "  runs drawing from it: %s\n", runs)
	for _, r := range j.Raises {
		fmt.Fprintf(w, "  raised %s by %s from %s: %s → %s\n", r.At.UTC().Format(time.RFC3339), r.By, r.Source,
			CapsText(budget.CapsOf(r.From)), CapsText(budget.CapsOf(r.To)))
	}
}

// CapsText is a budget's hard caps in words.
func CapsText(caps budget.Amount) string {
	var parts []string
	if caps.USD != budget.UnlimitedUSD {
		parts = append(parts, caps.USD.String())
	}
	if caps.Tokens != budget.Unlimited.Tokens {
		parts = append(parts, fmt.Sprintf("%d tokens", caps.Tokens))
	}
	return "hard " + strings.Join(parts, ", ")
}

// ZoneText is a window's time zone, after a space (UTC when none).
func ZoneText(zone string) string {
	if zone == "" {
		return " UTC"
	}
	return " " + zone
}

// NamedBudgetView is a named budget's status and raises, as shown.
func NamedBudgetView(st purser.NamedBudgetStatus, raises []purser.NamedBudgetRaise) NamedBudgetJSON {
	j := NamedBudgetJSON{Name: st.Name, Window: st.Window, Zone: st.Zone, WindowStart: st.WindowStart, WindowEnd: st.WindowEnd,
		Tier: st.Tier().String(), Budget: st.Budget, SpentUSD: json.Number(st.Spent.USD.Decimal()), SpentTokens: st.Spent.Tokens,
		HeldUSD: json.Number(st.Held.USD.Decimal()), HeldTokens: st.Held.Tokens, Runs: st.Runs, Raises: []NamedBudgetRaiseJSON{}}
	if j.Runs == nil {
		j.Runs = []string{}
	}
	if j.Zone == "" {
		j.Zone = "UTC" // as the text says: a window with no zone is UTC's
	}
	for _, r := range raises {
		j.Raises = append(j.Raises, NamedBudgetRaiseJSON{At: r.At, By: r.By, Source: r.Source, From: r.From, To: r.To})
	}
	return j
}
