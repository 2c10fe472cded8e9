// Package report renders what Purser knows for people and programs: the
// budget status table, STATUS.md and BUDGET.md.
package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/purser-dev/purser/budget"
)

const barWidth = 20

// Bar draws used/limit as a bar of barWidth cells.
func Bar(used, limit int64) string {
	if limit <= 0 {
		return ""
	}
	filled := int(min(max(used, 0), limit) * barWidth / limit)
	return "[" + strings.Repeat("#", filled) + strings.Repeat("-", barWidth-filled) + "]"
}

// BarFor draws a metric's bar against its hard cap, or against the first
// threshold it has when it has no hard cap. ok is false for a metric that is
// not configured.
func BarFor(cfg budget.Config, st budget.Status, m budget.Metric) (bar string, ok bool) {
	for _, t := range []budget.Tier{budget.Hard, budget.Optimal, budget.Warning} {
		limit, set := cfg.Threshold(t, m)
		if !set {
			continue
		}
		used := st.Used(m)
		return fmt.Sprintf("%s %5.1f%% of %s", Bar(used, limit), float64(used)*100/float64(limit), t), true
	}
	return "", false
}

// usedText is how much of a metric was used, for people; money says where
// its figure came from.
func usedText(st budget.Status, m budget.Metric) string {
	if m == budget.Money && st.ListUSD > 0 {
		return budget.FormatUSD(st.UsedUSD, st.USDSource) + "; " + budget.FormatListUSD(st.ListUSD)
	}
	if m == budget.Money {
		return budget.FormatUSD(st.UsedUSD, st.USDSource)
	}
	return m.Format(st.Used(m))
}

// metricRow returns a metric's thresholds (optimal, warning, hard; "-"
// where not configured) and its bar, or what stands instead of one.
func metricRow(cfg budget.Config, st budget.Status, m budget.Metric) (thresholds []string, bar string) {
	for _, t := range []budget.Tier{budget.Optimal, budget.Warning, budget.Hard} {
		if v, ok := cfg.Threshold(t, m); ok {
			thresholds = append(thresholds, m.Format(v))
		} else {
			thresholds = append(thresholds, "-")
		}
	}
	bar, ok := BarFor(cfg, st, m)
	switch {
	case !ok:
		bar = "not enforced"
	case m == budget.Money && st.USDSource == budget.SourceUnknown:
		bar = "not enforced: no dollar figure is known"
	}
	return thresholds, bar
}

// StatusTable writes a short table of a budget's status: one row and one bar
// per configured metric; a metric nobody configured says it is not enforced.
func StatusTable(w io.Writer, cfg budget.Config, st budget.Status) error {
	fmt.Fprintf(w, "tier: %s", strings.ToUpper(st.Tier.String()))
	if st.Tier != budget.Optimal {
		fmt.Fprintf(w, " (by %s)", st.Cause)
	}
	fmt.Fprintf(w, "    money: %s\n\n", budget.FormatUSD(st.UsedUSD, st.USDSource))

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "metric\tused\toptimal\twarning\thard\t")
	for _, m := range budget.Metrics {
		thresholds, bar := metricRow(cfg, st, m)
		fmt.Fprintln(tw, strings.Join(append(append([]string{m.String(), usedText(st, m)}, thresholds...), bar), "\t"))
	}
	return tw.Flush()
}
