package purser

import (
	"testing"

	"github.com/purser-dev/purser/budget"
)

// A task keeps a raise made by purser raise while its file still says what
// it said before; a later change of its own file, or a change by another
// hand, speaks instead.
func TestKeepsRaise(t *testing.T) {
	one, three, five := budget.Dollars(1), budget.Dollars(3), budget.Dollars(5)
	cfg := func(u *budget.USD) budget.Config { return budget.Config{Hard: budget.HardLimits{USD: u}} }
	raised := []BudgetChange{{Source: "/w/task.yaml", From: cfg(nil), To: cfg(&one)}, {Source: TaskRaiseSource + " --usd 3", From: cfg(&one), To: cfg(&three)}}
	for _, tc := range []struct {
		name    string
		changes []BudgetChange
		file    budget.Config
		want    bool
	}{
		{"the file unchanged since the raise", raised, cfg(&one), true},
		{"the file changed since the raise", raised, cfg(&five), false},
		{"the last change was the file's", raised[:1], cfg(&one), false},
		{"no change at all", nil, cfg(&one), false},
	} {
		if got := KeepsRaise(tc.changes, cfg(&three), tc.file); got != tc.want {
			t.Errorf("%s: KeepsRaise = %v, want %v", tc.name, got, tc.want)
		}
	}
}
