package report

import (
	"strings"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// A task's reason comes from agents and backends: in the job summary it
// stays in its cell, and in an annotation it cannot start a workflow command
// of its own or carry a secret.
func TestGitHubReportKeepsAgentTextInItsPlace(t *testing.T) {
	secret := "ghp_" + strings.Repeat("x1Y2", 9)
	reason := "budget exhausted | forged cell\n::add-mask::" + secret + "\n::error::forged"
	hard := budget.USD(1_000_000_000)
	iters := 3
	cfg := budget.Config{Hard: budget.HardLimits{USD: &hard, MaxIterations: &iters}}
	tasks := []CITask{{
		Record: purser.TaskRecord{ID: "t1", State: purser.StateBlocked, Reason: reason, Budget: cfg},
		Status: budget.Status{Tier: budget.Hard, Cause: budget.Money, UsedUSD: hard, UsedIterations: 2},
	}}
	var stdout, summary strings.Builder
	if err := GitHubReport(&stdout, &summary, tasks); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "::error title=Purser%3A t1 BLOCKED::") {
		t.Fatalf("want one ::error line, got %q", stdout.String())
	}
	if !strings.Contains(lines[0], "%0A::add-mask::") || strings.Contains(stdout.String(), secret) {
		t.Fatalf("the annotation lets the reason start a command or shows the secret: %q", lines[0])
	}
	var row string
	for _, l := range strings.Split(summary.String(), "\n") {
		if strings.HasPrefix(l, "| t1 |") {
			row = l
		}
	}
	if strings.Count(row, " | ") != 7 || !strings.Contains(row, `budget exhausted \| forged cell`) || strings.Contains(summary.String(), secret) {
		t.Fatalf("the summary row is broken by the reason or shows the secret:\n%s", summary.String())
	}
	if !strings.Contains(row, "| $1.00 (reported) / $1.00 |") || !strings.Contains(row, "| 2 / 3 |") {
		t.Fatalf("row = %s", row)
	}
}
