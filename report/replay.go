package report

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/replay"
)

// WriteReplay prints a replay's summary and its groups for people.
func WriteReplay(w io.Writer, rep replay.Report) error {
	s := rep.Summary
	fmt.Fprintf(w, "%d runs replayed (%d calls): %d stopped, %d of %d solved runs cut.\n", s.Runs, s.Calls, s.Stopped, s.SolvedCut, s.Solved)
	fmt.Fprintf(w, "Recorded spend %s; under this budget %s; saved %s.\n",
		totalUSD(s.RecordedUSD, s.USDSource), totalUSD(s.SpentUSD, s.USDSource), totalUSD(s.SavedUSD, s.USDSource))
	fmt.Fprintf(w, "A check-then-spend rule would have gone %s past the hard cap; admission goes nowhere past it.\n", Cents(s.NaiveOvershootUSD))
	if s.TotalsOnly > 0 {
		fmt.Fprintf(w, "%d runs have totals only: their savings (total − cap) are lower bounds, and their stop point unknown.\n", s.TotalsOnly)
	}
	// Every estimated dollar names the table it came from.
	fmt.Fprintln(w, s.PricesLine()+".")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SYSTEM\tMODEL\tRUNS\tSTOPPED\tSOLVED CUT\tRECORDED\tSPENT\tSAVED\tNOTE")
	for _, g := range rep.Groups {
		note := ""
		if g.TotalsOnly == g.Runs {
			note = "totals only: savings are lower bounds"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d/%d\t%s\t%s\t%s\t%s\n", g.System, g.Model, g.Runs, g.Stopped, g.SolvedCut, g.Solved,
			totalUSD(g.RecordedUSD, g.USDSource), totalUSD(g.SpentUSD, g.USDSource), totalUSD(g.SavedUSD, g.USDSource), note)
	}
	return tw.Flush()
}

// Cents is an amount rounded to the cent (half away from zero): a replay's
// totals add up thousands of recorded costs with up to nine decimals, which
// people read in cents as Purser prints money everywhere else. --json keeps
// them exact.
func Cents(u budget.USD) budget.USD {
	const nanosPerCent = budget.NanosPerDollar / 100
	n := int64(u)
	r := n % nanosPerCent
	n -= r
	switch {
	case r >= nanosPerCent/2:
		n += nanosPerCent
	case r <= -nanosPerCent/2:
		n -= nanosPerCent
	}
	return budget.USD(n)
}

// totalUSD is budget.FormatUSD of a total, in cents.
func totalUSD(u budget.USD, source budget.USDSource) string {
	return budget.FormatUSD(Cents(u), source)
}
