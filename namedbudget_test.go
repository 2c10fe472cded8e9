package purser

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// A window is a calendar day, week (from Monday) or month in its zone: its
// start is the zone's midnight, and a day across a daylight-saving change
// is as long as the calendar makes it.
func TestBudgetWindowBounds(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skipf("no time zone data: %v", err)
	}
	for _, tc := range []struct {
		name       string
		window     BudgetWindow
		zone       string
		now        time.Time
		start, end time.Time
	}{
		{"a UTC day", WindowDay, "", time.Date(2026, 11, 18, 23, 59, 59, 0, time.UTC),
			time.Date(2026, 11, 18, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 19, 0, 0, 0, 0, time.UTC)},
		{"a Sunday belongs to the week from the Monday before", WindowWeek, "", time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC),
			time.Date(2026, 11, 16, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)},
		{"a Monday's first instant starts its week", WindowWeek, "", time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC),
			time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)},
		{"December's month ends at the new year", WindowMonth, "", time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC),
			time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"Berlin's day is 23:00 UTC to 23:00 UTC in winter", WindowDay, "Europe/Berlin", time.Date(2026, 11, 18, 23, 30, 0, 0, time.UTC),
			time.Date(2026, 11, 18, 23, 0, 0, 0, time.UTC), time.Date(2026, 11, 19, 23, 0, 0, 0, time.UTC)},
		{"the day clocks go back in Berlin has 25 hours", WindowDay, "Europe/Berlin", time.Date(2026, 10, 25, 12, 0, 0, 0, berlin),
			time.Date(2026, 10, 24, 22, 0, 0, 0, time.UTC), time.Date(2026, 10, 25, 23, 0, 0, 0, time.UTC)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start, end, err := tc.window.Bounds(tc.now, tc.zone)
			if err != nil {
				t.Fatal(err)
			}
			if !start.Equal(tc.start) || !end.Equal(tc.end) {
				t.Fatalf("bounds %s – %s, want %s – %s", start.UTC(), end.UTC(), tc.start.UTC(), tc.end.UTC())
			}
		})
	}
	if _, err := ParseBudgetWindow("year"); err == nil {
		t.Error("window year accepted")
	}
	if _, _, err := WindowDay.Bounds(time.Now(), "Mars/Olympus"); err == nil {
		t.Error("an unknown zone accepted")
	}
}

// A budget's lineage runs up to its root; a parent that is the budget or
// one under it is refused with the loop it would make, and a missing
// parent is not found.
func TestBudgetLineageAndParents(t *testing.T) {
	parents := map[string]string{"org": "", "team": "org", "repo": "team", "other": ""}
	if up, err := Lineage(parents, "repo"); err != nil || !slices.Equal(up, []string{"repo", "team", "org"}) {
		t.Fatalf("Lineage(repo) = %v, %v; want repo, team, org", up, err)
	}
	var cycle *BudgetCycleError
	if err := CheckParent(parents, "org", "repo"); !errors.As(err, &cycle) || !slices.Equal(cycle.Path, []string{"org", "repo", "team", "org"}) ||
		!strings.Contains(err.Error(), "org → repo → team → org") {
		t.Fatalf("org under repo: %v, want the loop org → repo → team → org", err)
	}
	if err := CheckParent(parents, "org", "org"); !errors.Is(err, ErrBudgetCycle) {
		t.Fatalf("org under itself: %v, want ErrBudgetCycle", err)
	}
	if err := CheckParent(parents, "repo", "other"); err != nil {
		t.Fatalf("repo under another root: %v", err)
	}
	if err := CheckParent(parents, "repo", "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a missing parent: %v, want ErrNotFound", err)
	}
	looped := map[string]string{"a": "b", "b": "a"}
	if _, err := Lineage(looped, "a"); !errors.Is(err, ErrBudgetCycle) {
		t.Fatalf("a loop in the records: %v, want ErrBudgetCycle, not a hang", err)
	}
	if err := (NamedBudget{Name: "x", Parent: "x", Window: WindowDay}).Validate(); !errors.Is(err, ErrBudgetCycle) {
		t.Fatalf("a budget naming itself its parent: %v", err)
	}
}
