package advise

import (
	"fmt"
	"html"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/purser-dev/purser/budget"
)

// WriteText writes a group's advice: the proposal, the trade-off of
// candidate hard caps, a chart of the distribution, and the proposal as YAML.
func WriteText(w io.Writer, g Group) error {
	fmt.Fprintf(w, "%s · %s: %d runs, %d solved", g.System, g.Model, g.Runs, g.Solved)
	if g.TotalsOnly {
		fmt.Fprint(w, " (totals only: savings are lower bounds)")
	}
	fmt.Fprintln(w)
	if g.TooFew {
		_, err := fmt.Fprintf(w, "  not enough history to advise from: %d run(s), at least %d needed; run more tasks and advise again\n", g.Runs, MinRuns)
		return err
	}
	if len(g.Proposals) == 0 {
		_, err := fmt.Fprintln(w, "  no usage to advise from")
		return err
	}
	fmt.Fprintf(w, "  proposed from %s: optimal ≈ median, warning ≈ p75, hard ≈ p95\n", g.Basis)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, p := range g.Proposals {
		fmt.Fprintf(tw, "    %s\toptimal %s\twarning %s\thard %s\n", p.Metric, p.Metric.Format(p.Optimal), p.Metric.Format(p.Warning), p.Metric.Format(p.Hard))
	}
	tw.Flush()

	primary := g.Proposals[0]
	fmt.Fprintf(w, "\n  hard cap on %s: what it would have done (replayed with admission)\n", primary.Metric)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "    cap\tbasis\tstopped\tsolved runs cut\tmoney saved\t")
	for _, c := range g.TradeOff {
		fmt.Fprintf(tw, "    %s\t%s\t%d of %d\t%d of %d\t%s\t\n", primary.Metric.Format(c.Cap), c.Basis, c.Stopped, g.Runs, c.SolvedCut, g.Solved, short(budget.Money, int64(c.SavedUSD)))
	}
	tw.Flush()

	fmt.Fprintf(w, "\n  %s per run: █ solved  ░ unsolved   O optimal  W warning  H hard\n", primary.Metric)
	writeChart(w, g, primary)

	fmt.Fprintf(w, "\n  as a budget:\n")
	cfg := Config(g.Proposals, DefaultMaxIterations)
	for _, tier := range []budget.Tier{budget.Optimal, budget.Warning, budget.Hard} {
		var parts []string
		for _, p := range g.Proposals {
			if v, ok := cfg.Threshold(tier, p.Metric); ok {
				parts = append(parts, yamlPair(p.Metric, v))
			}
		}
		comment := ""
		if tier == budget.Hard {
			// Every other figure is read from the runs; this one cannot be
			// (they count calls, not iterations), and says so where it is
			// proposed, as a YAML comment so the block still pastes.
			parts = append(parts, fmt.Sprintf("maxIterations: %d", DefaultMaxIterations))
			comment = "  # a default, not from the runs: they record calls, not Purser iterations; set what a task may take"
		}
		fmt.Fprintf(w, "    %s: {%s}%s\n", tier, strings.Join(parts, ", "), comment)
	}
	_, err := fmt.Fprintln(w)
	return err
}

// short formats a value for charts and tables: cents, thousands of tokens,
// whole seconds.
func short(m budget.Metric, v int64) string {
	switch m {
	case budget.Money:
		return fmt.Sprintf("$%.2f", budget.USD(v).Float())
	case budget.Tokens:
		switch {
		case v >= 1_000_000:
			return fmt.Sprintf("%.2fM", float64(v)/1e6)
		case v >= 1000:
			return fmt.Sprintf("%.0fk", float64(v)/1e3)
		}
		return fmt.Sprint(v)
	}
	return time.Duration(v).Round(time.Second).String()
}

func yamlPair(m budget.Metric, v int64) string {
	switch m {
	case budget.Money:
		return "usd: " + budget.USD(v).Decimal()
	case budget.Tokens:
		return fmt.Sprintf("tokens: %d", v)
	}
	return fmt.Sprintf("timeMinutes: %g", float64(v)/6e10)
}

const chartBins, chartWidth = 16, 40

func writeChart(w io.Writer, g Group, p Proposal) {
	top := Top(g.Values, p.Hard)
	solved, unsolved := Histogram(g.Values, chartBins, top)
	most := 1
	for i := range solved {
		most = max(most, solved[i]+unsolved[i])
	}
	for i := range chartBins {
		lo, hi := top*int64(i)/chartBins, top*int64(i+1)/chartBins
		mark := ""
		for _, l := range []struct {
			v int64
			s string
		}{{p.Optimal, "O"}, {p.Warning, "W"}, {p.Hard, "H"}} {
			if l.v >= lo && l.v < hi {
				mark += l.s
			}
		}
		label := short(p.Metric, lo)
		if i == chartBins-1 {
			label += "+"
		}
		s := solved[i] * chartWidth / most
		u := unsolved[i] * chartWidth / most
		if solved[i] > 0 && s == 0 {
			s = 1
		}
		if unsolved[i] > 0 && u == 0 {
			u = 1
		}
		fmt.Fprintf(w, "  %10s %-3s│%s%s %d\n", label, mark, strings.Repeat("█", s), strings.Repeat("░", u), solved[i]+unsolved[i])
	}
}

// WriteSVG draws the distribution of solved and unsolved runs on the
// primary metric, with the proposed lines, as an SVG picture.
func WriteSVG(w io.Writer, groups []Group) error {
	const width, panelH, left, right, top, bottom = 900, 300, 70, 30, 60, 50
	var panels []Group
	for _, g := range groups {
		if len(g.Proposals) > 0 {
			panels = append(panels, g)
		}
	}
	height := max(len(panels), 1) * (panelH + top + bottom)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	for pi, g := range panels {
		p := g.Proposals[0]
		y0 := pi*(panelH+top+bottom) + top
		plotW := width - left - right
		topV := Top(g.Values, p.Hard)
		const bins = 40
		solved, unsolved := Histogram(g.Values, bins, topV)
		most := 1
		for i := range solved {
			most = max(most, solved[i]+unsolved[i])
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="15" font-weight="bold">%s · %s</text>`+"\n",
			left, y0-26, html.EscapeString(g.System), html.EscapeString(g.Model))
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#444">%s per run: %d runs, %d solved; proposed optimal ≈ median, warning ≈ p75, hard ≈ p95 of %s</text>`+"\n",
			left, y0-10, p.Metric, g.Runs, g.Solved, html.EscapeString(g.Basis))
		barW := float64(plotW) / bins
		for i := range bins {
			x := float64(left) + float64(i)*barW
			hs := float64(solved[i]) / float64(most) * panelH
			hu := float64(unsolved[i]) / float64(most) * panelH
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#2e8b57"><title>%d solved</title></rect>`+"\n", x+1, float64(y0+panelH)-hs, barW-2, hs, solved[i])
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#d9534f" fill-opacity="0.75"><title>%d unsolved</title></rect>`+"\n", x+1, float64(y0+panelH)-hs-hu, barW-2, hu, unsolved[i])
		}
		// Axes and ticks.
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, y0+panelH, left+plotW, y0+panelH)
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, y0, left, y0+panelH)
		for t := 0; t <= 5; t++ {
			v := topV * int64(t) / 5
			x := left + plotW*t/5
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", x, y0+panelH+18, html.EscapeString(short(p.Metric, v)))
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%d runs</text>`+"\n", left-6, y0+10, most)
		// Proposed lines.
		for _, l := range []struct {
			v     int64
			name  string
			color string
		}{{p.Optimal, "optimal", "#1f77b4"}, {p.Warning, "warning", "#ff8c00"}, {p.Hard, "hard", "#b00020"}} {
			x := float64(left) + float64(l.v)/float64(topV)*float64(plotW)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="2" stroke-dasharray="6 4"/>`+"\n", x, y0, x, y0+panelH, l.color)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="%s" transform="rotate(-90 %.1f %d)" text-anchor="end">%s %s</text>`+"\n",
				x-4, y0+4, l.color, x-4, y0+4, l.name, html.EscapeString(p.Metric.Format(l.v)))
		}
		// Legend.
		lx := left + plotW - 170
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="#2e8b57"/><text x="%d" y="%d">solved</text>`+"\n", lx, y0, lx+18, y0+11)
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="#d9534f" fill-opacity="0.75"/><text x="%d" y="%d">unsolved</text>`+"\n", lx+80, y0, lx+98, y0+11)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
