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
		budget.FormatUSD(s.RecordedUSD, s.USDSource), budget.FormatUSD(s.SpentUSD, s.USDSource), budget.FormatUSD(s.SavedUSD, s.USDSource))
	fmt.Fprintf(w, "A check-then-spend rule would have gone %s past the hard cap; admission goes nowhere past it.\n", s.NaiveOvershootUSD)
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
			budget.FormatUSD(g.RecordedUSD, g.USDSource), budget.FormatUSD(g.SpentUSD, g.USDSource), budget.FormatUSD(g.SavedUSD, g.USDSource), note)
	}
	return tw.Flush()
}
