package purser

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/purser-dev/purser/budget"
)

// BudgetWindow is the calendar window a named budget resets on.
type BudgetWindow string

// The windows a named budget may reset on. A week starts on Monday.
const (
	WindowDay   BudgetWindow = "day"
	WindowWeek  BudgetWindow = "week"
	WindowMonth BudgetWindow = "month"
)

// ParseBudgetWindow reads a window's name, saying what was expected when it
// is not one.
func ParseBudgetWindow(s string) (BudgetWindow, error) {
	switch w := BudgetWindow(s); w {
	case WindowDay, WindowWeek, WindowMonth:
		return w, nil
	}
	return "", fmt.Errorf("window %q: expected day, week or month", s)
}

// Bounds is the window holding now, [start, end), in zone (an IANA name
// such as "Europe/Berlin"; "" is UTC): calendar days, so a day may be 23
// or 25 hours long across a daylight-saving change.
func (w BudgetWindow) Bounds(now time.Time, zone string) (start, end time.Time, err error) {
	if start, err = w.Start(now, zone); err != nil {
		return start, end, err
	}
	switch w {
	case WindowDay:
		end = start.AddDate(0, 0, 1)
	case WindowWeek:
		end = start.AddDate(0, 0, 7)
	default:
		end = start.AddDate(0, 1, 0)
	}
	return start, end, nil
}

// Start is the beginning of the window that holds now, in zone (an IANA
// name such as "Europe/Berlin"; "" is UTC).
func (w BudgetWindow) Start(now time.Time, zone string) (time.Time, error) {
	loc := time.UTC
	if zone != "" {
		l, err := time.LoadLocation(zone)
		if err != nil {
			return time.Time{}, fmt.Errorf("zone %q: %w", zone, err)
		}
		loc = l
	}
	t := now.In(loc)
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
	switch w {
	case WindowDay:
		return day, nil
	case WindowWeek:
		back := (int(t.Weekday()) + 6) % 7 // days since Monday
		return day.AddDate(0, 0, -back), nil
	case WindowMonth:
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, loc), nil
	}
	return time.Time{}, fmt.Errorf("window %q: expected day, week or month", string(w))
}

// NamedBudget is a long-lived budget that runs draw from — a team's month,
// a repository's day: the three tiers over money and tokens, counted over
// the spend of every run drawing from it inside the current window.
type NamedBudget struct {
	Name   string
	Budget budget.Config
	Window BudgetWindow
	// Zone is the IANA time zone the window's boundaries are in; "" is UTC.
	Zone string
	// Parent is the named budget this one is a part of ("" for a root): a
	// run drawing from a budget draws from its every ancestor too, and is
	// admitted only where all of them have room. A child's caps may exceed
	// what its parent has left; the parent still binds.
	Parent    string
	CreatedAt time.Time
}

// Validate reports what is wrong with a named budget: a bad name, window
// or zone, a budget that is not valid, or a cap on time or iterations,
// which a budget shared over days has no meaning for.
func (b NamedBudget) Validate() error {
	if err := ValidateBudgetName(b.Name); err != nil {
		return err
	}
	if b.Parent != "" {
		if err := ValidateBudgetName(b.Parent); err != nil {
			return fmt.Errorf("parent: %w", err)
		}
		if b.Parent == b.Name {
			return &BudgetCycleError{Name: b.Name, Parent: b.Parent, Path: []string{b.Name, b.Name}}
		}
	}
	if _, err := b.Window.Start(time.Now(), b.Zone); err != nil {
		return err
	}
	return ValidateNamedBudgetConfig(b.Budget)
}

// ValidateBudgetName reports what is wrong with a named budget's name: it
// is empty, or holds more than letters, digits, '-', '_' and '.'.
func ValidateBudgetName(name string) error {
	if name == "" {
		return errors.New("name: must not be empty")
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("name %q: only letters, digits, '-', '_' and '.' are allowed", name)
		}
	}
	return nil
}

// ValidateNamedBudgetConfig checks a named budget's tiers: a task's rules,
// bar the cap on iterations a task must have, with money and tokens the
// only metrics and at least one of them capped. Each problem is a
// *budget.ValidationError naming its field.
func ValidateNamedBudgetConfig(cfg budget.Config) error {
	if cfg.Hard.MaxIterations != nil {
		return &budget.ValidationError{Field: "hard.maxIterations", Msg: "a named budget caps only usd and tokens (iterations belong to a task)"}
	}
	// A task's budget must cap its iterations; a named budget has none to
	// cap, so the rest of the rules are checked as if it did.
	one := 1
	checked := cfg
	checked.Hard.MaxIterations = &one
	if err := checked.Validate(); err != nil {
		return err
	}
	for _, l := range []struct {
		tier string
		lim  budget.Limits
	}{{"optimal", cfg.Optimal}, {"warning", cfg.Warning}, {"hard", cfg.Hard.Limits()}} {
		if l.lim.TimeMinutes != nil {
			return &budget.ValidationError{Field: l.tier + ".timeMinutes", Msg: "a named budget caps only usd and tokens (its window is its time)"}
		}
	}
	if cfg.Hard.USD == nil && cfg.Hard.Tokens == nil {
		return &budget.ValidationError{Field: "hard", Msg: "a named budget needs a hard cap on usd or tokens"}
	}
	return nil
}

// Caps is the budget's hard caps as an amount (budget.Unlimited where not
// capped), by budget.CapsOf.
func (b NamedBudget) Caps() budget.Amount { return budget.CapsOf(b.Budget) }

// NamedBudgetRaise is a named budget changed by the user: from what, to
// what, by whom, when, from which file.
type NamedBudgetRaise struct {
	Name   string
	At     time.Time
	By     string // user@host
	Source string
	From   budget.Config
	To     budget.Config
}

// NamedBudgetStatus is a named budget as it stands in its current window.
type NamedBudgetStatus struct {
	NamedBudget
	WindowStart, WindowEnd time.Time
	// Spent is the ledger of every run drawing from the budget, timed in
	// [WindowStart, WindowEnd) (USD and Tokens only).
	Spent budget.Totals
	// Held is what calls in flight hold on it, unexpired.
	Held budget.Amount
	// Runs are the runs drawing from it.
	Runs []string
}

// StatusAt is b's status in the window holding now, before any spend or
// hold is counted: the window's bounds, in b's zone.
func (b NamedBudget) StatusAt(now time.Time) (NamedBudgetStatus, error) {
	st := NamedBudgetStatus{NamedBudget: b}
	var err error
	if st.WindowStart, st.WindowEnd, err = b.Window.Bounds(now, b.Zone); err != nil {
		return st, fmt.Errorf("named budget %s: %w", b.Name, err)
	}
	return st, nil
}

// Tier is the budget's tier by its spend in the window: the worse of its
// money's and its tokens'.
func (s NamedBudgetStatus) Tier() budget.Tier {
	return max(s.Budget.MetricTier(budget.Money, int64(s.Spent.USD)), s.Budget.MetricTier(budget.Tokens, s.Spent.Tokens))
}

// Standing is where the budget stands, for a refusal that names it.
func (s NamedBudgetStatus) Standing() *budget.NamedStanding {
	return &budget.NamedStanding{Window: string(s.Window), Parent: s.Parent, Spent: s.Spent.Amount(), Caps: s.Caps()}
}

// Headroom is what a new hold on the budget could take in this window: its
// caps after the window's spend and the holds of calls in flight. Both
// stores admit by it, under their lock, and the engine sizes calls by it.
func (s NamedBudgetStatus) Headroom() budget.Amount {
	return budget.Headroom(s.Caps(), s.Spent.Amount(), s.Held)
}

// ErrBudgetCycle is matched by a parent that would make a named budget its
// own ancestor.
var ErrBudgetCycle = errors.New("a named budget cannot be its own ancestor")

// BudgetCycleError refuses a parent that would make a cycle, saying which:
// Path runs from the budget up through its would-be ancestors back to it.
type BudgetCycleError struct {
	Name, Parent string
	Path         []string
}

func (e *BudgetCycleError) Error() string {
	return fmt.Sprintf("named budget %s cannot have parent %s: it would be its own ancestor (%s)", e.Name, e.Parent, strings.Join(e.Path, " → "))
}

// Unwrap lets errors.Is match ErrBudgetCycle.
func (e *BudgetCycleError) Unwrap() error { return ErrBudgetCycle }

// Lineage is name and its ancestors, nearest first, as parents (each
// budget's parent, "" for a root) has them. A parent missing from parents
// matches ErrNotFound; a loop (a store never records one) ErrBudgetCycle.
func Lineage(parents map[string]string, name string) ([]string, error) {
	out := []string{name}
	for cur := name; ; {
		p, ok := parents[cur]
		if !ok {
			return out, fmt.Errorf("named budget %s: %w", cur, ErrNotFound)
		}
		if p == "" {
			return out, nil
		}
		if slices.Contains(out, p) {
			return out, &BudgetCycleError{Name: name, Parent: parents[name], Path: append(out, p)}
		}
		out = append(out, p)
		cur = p
	}
}

// CheckParent reports whether name may take parent as its parent, given
// every budget's parent: the parent must exist, and must not be name or a
// descendant of name (a *BudgetCycleError says the loop).
func CheckParent(parents map[string]string, name, parent string) error {
	if parent == "" {
		return nil
	}
	up, err := Lineage(parents, parent)
	if err != nil {
		return err
	}
	if i := slices.Index(up, name); i >= 0 {
		path := append([]string{name}, up[:i+1]...)
		return &BudgetCycleError{Name: name, Parent: parent, Path: path}
	}
	return nil
}

// ErrBudgetExists is returned by CreateBudget for a name already taken.
var ErrBudgetExists = errors.New("a named budget of that name exists")

// NamedBudgets keeps named budgets, which runs draw from them, and admits
// calls against them across processes. now is the caller's clock (tests
// inject one): it places the window; holds expire by the store's clock.
type NamedBudgets interface {
	// CreateBudget records a new named budget; a taken name is an error
	// matching ErrBudgetExists.
	CreateBudget(ctx context.Context, b NamedBudget) error
	// NamedBudget returns one; a missing one matches ErrNotFound.
	NamedBudget(ctx context.Context, name string) (NamedBudget, error)
	// NamedBudgetList returns every named budget, by name.
	NamedBudgetList(ctx context.Context) ([]NamedBudget, error)
	// SetBudgetParent makes parent ("" for none) the named budget's parent,
	// recording the change as a raise from by and source. A parent that
	// does not exist matches ErrNotFound; one that would make a loop is a
	// *BudgetCycleError.
	SetBudgetParent(ctx context.Context, name, parent, by, source string, at time.Time) error
	// RaiseBudget replaces a named budget's tiers with r.To, recording r.
	RaiseBudget(ctx context.Context, r NamedBudgetRaise) error
	// BudgetRaises returns a named budget's raises, oldest first.
	BudgetRaises(ctx context.Context, name string) ([]NamedBudgetRaise, error)
	// DrawFrom records that runID draws from the named budgets (added to
	// any it draws from already); an unknown name matches ErrNotFound.
	DrawFrom(ctx context.Context, runID string, names []string) error
	// RunDraws returns the named budgets a run draws from: those it was
	// told to draw from and every ancestor of theirs, roots first (then by
	// name), the order admission checks them in, so that a refusal names
	// the budget nearest the root.
	RunDraws(ctx context.Context, runID string) ([]string, error)
	// NamedBudgetStatus is the budget's spend and holds in the window
	// holding now. Its spend is that of every run drawing from it or from
	// a budget under it; its holds are those placed on it.
	NamedBudgetStatus(ctx context.Context, name string, now time.Time) (NamedBudgetStatus, error)
	// ReserveNamed is ReserveNamedAll for one budget: it holds want on
	// name and every ancestor of name's.
	ReserveNamed(ctx context.Context, name string, by Holder, want budget.Amount, now time.Time, ttl time.Duration) (release func(), err error)
	// ReserveNamedAll holds want on every named budget in names and on
	// every ancestor of theirs, each once, against its hard caps, counting
	// its window's spend and every unexpired hold on it: on all of them or
	// on none, atomically across processes. A hold that does not fit on
	// one is refused with a *budget.InsufficientBudgetError of scope
	// budget.ScopeNamed naming that budget (the one nearest the root, when
	// several are short). The holds are recorded as by's.
	ReserveNamedAll(ctx context.Context, names []string, by Holder, want budget.Amount, now time.Time, ttl time.Duration) (release func(), err error)
}

// NamedUsage is a budgets database apart from the project databases whose
// runs draw from its budgets (the user-level one): since it keeps none of
// their ledgers, each entry of theirs is copied to it, and its budgets'
// spend counts the copies with its own ledger.
type NamedUsage interface {
	// AppendNamedUsage copies entries, whose RunID is the run as this
	// database knows it, atomically; an entry whose run and Key are there
	// already is ignored, so copying again after a retry, a resume or a
	// crash never counts twice.
	AppendNamedUsage(ctx context.Context, entries ...LedgerEntry) error
}
