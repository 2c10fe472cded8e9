package budget

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// Clock tells the time. The Manager reads it for the wall-time metric;
// tests inject a fake one.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// SystemClock is the real clock.
var SystemClock Clock = systemClock{}

// Totals is what a budget has used, in exact units. It is what a store
// persists and what a resumed task starts from.
type Totals struct {
	USD        USD
	Tokens     int64
	Time       time.Duration
	Iterations int
	// Counts of money-bearing events by provenance; they decide USDSource.
	ReportedEvents, EstimatedEvents, UnknownEvents int64
	// ListUSD sums the list-price dollars of usage on flat-rate plans
	// (CostList), ListEvents counts those events: kept apart from USD, which
	// is money spent and what money caps are checked against.
	ListUSD    USD
	ListEvents int64
}

// USDSource labels the money total by the provenance of its events.
func (t Totals) USDSource() USDSource {
	known := t.ReportedEvents + t.EstimatedEvents
	switch {
	case t.UnknownEvents > 0 && known > 0:
		return SourcePartial
	case t.UnknownEvents > 0:
		return SourceUnknown
	case t.EstimatedEvents > 0:
		return SourceEstimated
	}
	return SourceReported
}

// Add adds one event to the totals, its elapsed time included.
func (t *Totals) Add(ev UsageEvent) { t.add(ev, true) }

// Merge adds other's totals to t, saturating as Add does.
func (t *Totals) Merge(other Totals) {
	t.USD = t.USD.Plus(other.USD)
	t.Tokens = SatAdd(t.Tokens, other.Tokens)
	t.Time = time.Duration(SatAdd(int64(t.Time), int64(other.Time)))
	t.Iterations += other.Iterations
	t.ReportedEvents = SatAdd(t.ReportedEvents, other.ReportedEvents)
	t.EstimatedEvents = SatAdd(t.EstimatedEvents, other.EstimatedEvents)
	t.UnknownEvents = SatAdd(t.UnknownEvents, other.UnknownEvents)
	t.ListUSD = t.ListUSD.Plus(other.ListUSD)
	t.ListEvents = SatAdd(t.ListEvents, other.ListEvents)
}

// Minus is t − other, field by field, saturating as Merge does: what t
// counts beyond other. A run shared by processes learns what the others
// spent as the store's totals minus what it counted itself.
func (t Totals) Minus(other Totals) Totals {
	return Totals{
		USD:             USD(SatSub(int64(t.USD), int64(other.USD))),
		Tokens:          SatSub(t.Tokens, other.Tokens),
		Time:            time.Duration(SatSub(int64(t.Time), int64(other.Time))),
		Iterations:      t.Iterations - other.Iterations,
		ReportedEvents:  SatSub(t.ReportedEvents, other.ReportedEvents),
		EstimatedEvents: SatSub(t.EstimatedEvents, other.EstimatedEvents),
		UnknownEvents:   SatSub(t.UnknownEvents, other.UnknownEvents),
		ListUSD:         USD(SatSub(int64(t.ListUSD), int64(other.ListUSD))),
		ListEvents:      SatSub(t.ListEvents, other.ListEvents),
	}
}

func (t *Totals) add(ev UsageEvent, withElapsed bool) {
	t.Tokens = SatAdd(t.Tokens, ev.Tokens())
	if withElapsed {
		t.Time = time.Duration(SatAdd(int64(t.Time), int64(ev.Elapsed)))
	}
	if ev.IterationEnd {
		t.Iterations++
	}
	switch ev.CostSource {
	case CostReported:
		t.USD = t.USD.Plus(ev.USD)
		t.ReportedEvents++
		// Additive, so running sums (the ledger's totals rows) stay right.
		t.UnknownEvents -= ev.SettlesUnknown
	case CostEstimated:
		t.USD = t.USD.Plus(ev.USD)
		t.EstimatedEvents++
	case CostUnknown:
		t.UnknownEvents++
	case CostList:
		// Never money spent: a list price on a flat-rate plan.
		t.ListUSD = t.ListUSD.Plus(ev.USD)
		t.ListEvents++
		t.UnknownEvents -= ev.SettlesUnknown
	}
}

// Amount is usage to reserve before a call: its worst-case money and tokens.
type Amount struct {
	USD    USD
	Tokens int64
}

// Unlimited is the headroom of a budget that caps neither money nor tokens.
var Unlimited = Amount{USD: UnlimitedUSD, Tokens: math.MaxInt64}

// Change tells a listener that a budget moved to another tier.
type Change struct {
	Scope    Scope
	From, To Tier
	Status   Status
}

// Options configure a Manager.
type Options struct {
	// Clock defaults to SystemClock.
	Clock Clock
	// Parent is the run's budget for a task's Manager: recording on the task
	// records on the run, and admission must fit both.
	Parent *Manager
	// Scope is ScopeTask unless this Manager is a run's budget.
	Scope Scope
	// Initial is what was used before, e.g. by a task being resumed.
	Initial Totals
}

type listener struct {
	id int
	fn func(Change)
}

// Manager tracks one budget (a task's or a run's) and answers the spec's
// BudgetManager questions. It is safe for concurrent use.
type Manager struct {
	cfg    Config
	limits [Iterations + 1]metricLimits
	caps   Amount // CapsOf(cfg): what admission holds against
	clock  Clock
	parent *Manager
	scope  Scope
	timed  bool // wall time has a threshold: recording reads the clock

	mu     sync.Mutex
	totals Totals
	// external is what other processes spent on this budget, beyond what
	// was recorded here (SetExternal): a run shared by processes on many
	// hosts is judged on everyone's spend, not this process's alone.
	external  Totals
	reserved  Amount
	running   bool
	startedAt time.Time
	tier      Tier
	listeners []listener
	nextID    int
	// warningBy: the metric HoldWarning put this budget in WARNING by,
	// whatever its spend says; NoMetric while it has not.
	warningBy Metric
}

// NewManager validates cfg and returns a Manager for it.
func NewManager(cfg Config, opts Options) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid budget: %w", err)
	}
	m := &Manager{cfg: cfg, clock: opts.Clock, parent: opts.Parent, scope: opts.Scope, totals: opts.Initial}
	if m.clock == nil {
		m.clock = SystemClock
	}
	for _, metric := range Metrics {
		m.limits[metric] = cfg.limits(metric)
	}
	m.timed = m.limits[Time].configured()
	m.caps = CapsOf(cfg)
	m.tier, _ = m.tierLocked(m.clock.Now())
	return m, nil
}

// Config returns the budget this Manager enforces.
func (m *Manager) Config() Config { return m.cfg }

// Parent returns the run's Manager, or nil.
func (m *Manager) Parent() *Manager { return m.parent }

// Scope says whether this is a task's or a run's budget.
func (m *Manager) Scope() Scope { return m.scope }

// StartClock starts counting wall time. Time accumulates across
// StartClock/StopClock pairs, so a resumed task keeps what it used.
func (m *Manager) StartClock() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.running {
		m.running = true
		m.startedAt = m.clock.Now()
	}
}

// StopClock stops counting wall time.
func (m *Manager) StopClock() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.running {
		m.totals.Time = time.Duration(SatAdd(int64(m.totals.Time), int64(m.clock.Now().Sub(m.startedAt))))
		m.running = false
	}
}

func (m *Manager) usedLocked(metric Metric, now time.Time) int64 {
	switch metric {
	case Money:
		return int64(m.totals.USD.Plus(m.external.USD))
	case Tokens:
		return SatAdd(m.totals.Tokens, m.external.Tokens)
	case Time:
		t := m.totals.Time
		if m.running {
			t = time.Duration(SatAdd(int64(t), int64(now.Sub(m.startedAt))))
		}
		return int64(t)
	case Iterations:
		return int64(m.totals.Iterations + m.external.Iterations)
	}
	return 0
}

// allLocked is what this budget has used: recorded here, and by others.
func (m *Manager) allLocked() Totals {
	t := m.totals
	ext := m.external
	ext.Time = 0 // a budget's wall time is its own clock
	t.Merge(ext)
	return t
}

// SetExternal tells this budget what other processes sharing it have spent
// beyond what was recorded here, as read from the store they share. Each
// field only grows: a smaller figure than one already given (a read that
// raced a recording) is ignored, so a caller may pass any lower bound of
// the truth. Time is not taken: a budget's wall time is its own clock.
// Listeners are told at once when the figure moves the budget to another
// tier (a HARD reached by another process cancels the calls here).
func (m *Manager) SetExternal(others Totals) Tier {
	m.mu.Lock()
	e := &m.external
	e.USD = max(e.USD, others.USD)
	e.Tokens = max(e.Tokens, others.Tokens)
	e.Iterations = max(e.Iterations, others.Iterations)
	e.ReportedEvents = max(e.ReportedEvents, others.ReportedEvents)
	e.EstimatedEvents = max(e.EstimatedEvents, others.EstimatedEvents)
	e.UnknownEvents = max(e.UnknownEvents, others.UnknownEvents)
	t, ls, ch := m.observeLocked(m.nowLocked())
	m.mu.Unlock()
	if ls != nil {
		notify(ls, ch)
	}
	return t
}

// tierLocked is the overall tier: the highest of any configured metric,
// and at least WARNING (by the metric held) while HoldWarning holds it
// there.
func (m *Manager) tierLocked(now time.Time) (Tier, Metric) {
	tier, cause := m.spendTierLocked(now)
	if m.warningBy != NoMetric && tier < Warning {
		return Warning, m.warningBy
	}
	return tier, cause
}

// spendTierLocked is the tier the budget's figures alone put it in.
func (m *Manager) spendTierLocked(now time.Time) (Tier, Metric) {
	tier, cause := Optimal, NoMetric
	for _, metric := range Metrics {
		if t := m.limits[metric].tier(m.usedLocked(metric, now)); t > tier {
			tier, cause = t, metric
		}
	}
	return tier, cause
}

// now reads the clock only when wall time can change a tier, which keeps
// recording cheap for budgets without a time limit.
func (m *Manager) nowLocked() time.Time {
	if m.running {
		return m.clock.Now()
	}
	return time.Time{}
}

// observeLocked recomputes the tier and, when it changed, returns the
// listeners to tell (called after the lock is released).
func (m *Manager) observeLocked(now time.Time) (Tier, []listener, Change) {
	t, _ := m.tierLocked(now)
	if t == m.tier {
		return t, nil, Change{}
	}
	ch := Change{Scope: m.scope, From: m.tier, To: t, Status: m.statusLocked(now)}
	m.tier = t
	return t, append([]listener(nil), m.listeners...), ch
}

func notify(ls []listener, ch Change) {
	for _, l := range ls {
		l.fn(ch)
	}
}

// RecordUsage records one usage event on this budget and on its run's, and
// returns this budget's tier after it. A listener is told at once when the
// recording moves a budget to another tier. The clock is read at most once
// per event (issue 24: reading it is most of the cost of recording): only
// for a budget whose wall time is capped and counting, and the reading
// serves every budget above it on the same clock.
func (m *Manager) RecordUsage(ev UsageEvent) Tier {
	var c clockReading
	t := m.apply(ev, true, &c)
	for p := m.parent; p != nil; p = p.parent {
		// A run's wall time is its own clock, not the sum of its tasks'.
		p.apply(ev, false, &c)
	}
	return t
}

// clockReading is one event's reading of the clock, shared by the budgets
// the event is recorded on.
type clockReading struct {
	clock Clock // the clock read; nil: not read yet
	now   time.Time
}

// at is the time on clock, for a budget whose clock started at start: the
// event's reading when it was of the system clock, a fresh one otherwise
// (an injected clock is read each time, as tests expect). The system clock
// is read as the monotonic time since start (time.Since), one reading of
// the clock where time.Now takes two (wall and monotonic); wall time is
// only ever a difference of monotonic readings here.
func (c *clockReading) at(clock Clock, start time.Time) time.Time {
	if _, sys := clock.(systemClock); sys {
		if _, sysRead := c.clock.(systemClock); !sysRead {
			c.clock, c.now = clock, start.Add(time.Since(start))
		}
		return c.now
	}
	c.clock, c.now = clock, clock.Now()
	return c.now
}

func (m *Manager) apply(ev UsageEvent, withElapsed bool, c *clockReading) Tier {
	m.mu.Lock()
	m.totals.add(ev, withElapsed)
	// Wall time decides a tier only where it is capped: elsewhere the
	// clock is not read at all.
	var now time.Time
	if m.running && m.timed {
		// A reading shared with a budget below may predate this one's
		// StartClock by a moment: never count negative time.
		if now = c.at(m.clock, m.startedAt); now.Before(m.startedAt) {
			now = m.startedAt
		}
	}
	t, _ := m.tierLocked(now)
	if t == m.tier {
		m.mu.Unlock()
		return t
	}
	if m.running && !m.timed {
		now = c.at(m.clock, m.startedAt) // the status in the Change shows the time used
	}
	ch := Change{Scope: m.scope, From: m.tier, To: t, Status: m.statusLocked(now)}
	m.tier = t
	ls := append([]listener(nil), m.listeners...)
	m.mu.Unlock()
	notify(ls, ch)
	return t
}

// OnChange registers fn to be called each time this budget changes tier. It
// is called synchronously, outside the Manager's lock, by the goroutine whose
// recording (or reading of the clock) caused the change. The returned
// function unregisters fn.
func (m *Manager) OnChange(fn func(Change)) (cancel func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nextID++
	id := m.nextID
	m.listeners = append(m.listeners, listener{id: id, fn: fn})
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		for i, l := range m.listeners {
			if l.id == id {
				m.listeners = append(m.listeners[:i:i], m.listeners[i+1:]...)
				return
			}
		}
	}
}

// Tier returns this budget's overall tier now.
func (m *Manager) Tier() Tier {
	m.mu.Lock()
	t, ls, ch := m.observeLocked(m.nowLocked())
	m.mu.Unlock()
	if ls != nil {
		notify(ls, ch)
	}
	return t
}

// GetTier returns the tier of the task's budget or of its run's. A scope
// with no budget is Optimal: nothing of it is enforced.
func (m *Manager) GetTier(scope Scope) Tier {
	for c := m; c != nil; c = c.parent {
		if c.scope == scope {
			return c.Tier()
		}
	}
	return Optimal
}

// ShouldApplyDegrade is true when this budget or its run's is in WARNING or
// above.
func (m *Manager) ShouldApplyDegrade() bool {
	for c := m; c != nil; c = c.parent {
		if c.Tier() >= Warning {
			return true
		}
	}
	return false
}

// ShouldStop is true when this budget or its run's is at its hard cap.
func (m *Manager) ShouldStop() bool { return m.Check() != nil }

// Check returns a *BudgetExhaustedError when this budget or its run's is at
// its hard cap, and nil otherwise. The engine calls it before any work.
func (m *Manager) Check() error {
	for c := m; c != nil; c = c.parent {
		if c.Tier() == Hard {
			return c.exhausted()
		}
	}
	return nil
}

func (m *Manager) exhausted() *BudgetExhaustedError {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.exhaustedLocked(m.nowLocked())
}

func (m *Manager) exhaustedLocked(now time.Time) *BudgetExhaustedError {
	st := m.statusLocked(now)
	return &BudgetExhaustedError{Scope: m.scope, Metric: st.Cause, Status: st, Limit: m.limits[st.Cause].hard.v}
}

// Status returns this budget's status now.
func (m *Manager) Status() Status {
	m.mu.Lock()
	now := m.nowLocked()
	st := m.statusLocked(now)
	_, ls, ch := m.observeLocked(now)
	m.mu.Unlock()
	if ls != nil {
		notify(ls, ch)
	}
	return st
}

// Totals returns what this budget has used, wall time up to now included.
func (m *Manager) Totals() Totals {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.allLocked()
	t.Time = time.Duration(m.usedLocked(Time, m.nowLocked()))
	return t
}

func pct(used int64, th threshold) Percent {
	if !th.set {
		return Percent{}
	}
	return Percent{Value: float64(used) / float64(th.v) * 100, Valid: true}
}

func (m *Manager) statusLocked(now time.Time) Status {
	tier, cause := m.tierLocked(now)
	all := m.allLocked()
	st := Status{
		Tier:           tier,
		Cause:          cause,
		UsedUSD:        all.USD,
		USDSource:      all.USDSource(),
		ListUSD:        all.ListUSD,
		UsedTokens:     all.Tokens,
		UsedTime:       time.Duration(m.usedLocked(Time, now)),
		UsedIterations: all.Iterations,
		IsInWarning:    tier == Warning,
		IsAtHardCap:    tier == Hard,
	}
	if st.USDSource != SourceUnknown {
		money := m.limits[Money]
		st.USDPctOfOptimal = pct(int64(st.UsedUSD), money.optimal)
		st.USDPctOfHard = pct(int64(st.UsedUSD), money.hard)
	}
	st.TokensPctOfOptimal = pct(st.UsedTokens, m.limits[Tokens].optimal)
	st.TokensPctOfHard = pct(st.UsedTokens, m.limits[Tokens].hard)
	st.TimePctOfOptimal = pct(int64(st.UsedTime), m.limits[Time].optimal)
	st.TimePctOfHard = pct(int64(st.UsedTime), m.limits[Time].hard)
	for _, metric := range []Metric{Money, Tokens, Time} {
		if m.limits[metric].pastWarningLine(m.usedLocked(metric, now)) {
			st.PastWarningLine = true
		}
	}
	return st
}

// Configured reports whether a metric has any threshold in this budget.
func (m *Manager) Configured(metric Metric) bool { return m.limits[metric].configured() }

// HardDeadline returns when wall time will reach the hard cap of this budget
// or its run's, whichever is first, while their clocks run.
func (m *Manager) HardDeadline() (time.Time, bool) {
	var first time.Time
	found := false
	for c := m; c != nil; c = c.parent {
		c.mu.Lock()
		hard := c.limits[Time].hard
		if hard.set && c.running {
			d := c.startedAt.Add(time.Duration(hard.v) - c.totals.Time)
			if !found || d.Before(first) {
				first, found = d, true
			}
		}
		c.mu.Unlock()
	}
	return first, found
}

// ErrInsufficientBudget is wrapped by every *InsufficientBudgetError.
var ErrInsufficientBudget = errors.New("insufficient budget")

// InsufficientBudgetError says that a reservation does not fit under a hard
// cap, and how much would: a caller can shrink its call to Available.
type InsufficientBudgetError struct {
	Scope     Scope  // the budget that is short
	Name      string // for ScopeNamed: the named budget's name
	Metric    Metric // Money or Tokens
	Want      Amount
	Available Amount // what does fit in the task and its run together
	// Named says, for ScopeNamed, where the named budget stands when it is
	// known (nil otherwise), so that the refusal reads the way the tree is
	// written: `day budget "payments-api" (under "payments"): $4.80 of
	// $5.00 spent`.
	Named *NamedStanding
}

// NamedStanding is a named budget's place and spend, as a refusal names it.
type NamedStanding struct {
	Window string // "day", "week" or "month"
	Parent string // "" for a root
	Spent  Amount // the window's spend (USD and tokens)
	Caps   Amount // its hard caps (Unlimited where none)
}

func (e *InsufficientBudgetError) Error() string {
	if e.Scope == ScopeNamed && e.Named != nil {
		return e.namedError()
	}
	whose := e.Scope.String()
	if e.Scope == ScopeNamed {
		whose = fmt.Sprintf("named %q", e.Name)
	}
	if e.Metric == Money && e.Want.USD <= e.Available.USD {
		// The call's worst case fits by its price, so its price is unknown
		// (or nothing): what refused it is money already spent.
		return fmt.Sprintf("insufficient budget: %s budget's hard cap on money is reached (%s left); a call whose dollars are known only once spent cannot be admitted",
			whose, e.Available.USD)
	}
	if e.Metric == Money {
		return fmt.Sprintf("insufficient budget: call needs up to %s, %s budget has %s left under its hard cap",
			e.Want.USD, whose, e.Available.USD)
	}
	return fmt.Sprintf("insufficient budget: call needs up to %d tokens, %s budget has %d left under its hard cap",
		e.Want.Tokens, whose, e.Available.Tokens)
}

// Unwrap lets errors.Is match ErrInsufficientBudget.
func (e *InsufficientBudgetError) Unwrap() error { return ErrInsufficientBudget }

// namedError names the node of the budget tree that refused, its window,
// its spend against its cap, and what the call would have needed.
func (e *InsufficientBudgetError) namedError() string {
	n := e.Named
	where := fmt.Sprintf("%s budget %q", n.Window, e.Name)
	if n.Parent != "" {
		where += fmt.Sprintf(" (under %q)", n.Parent)
	}
	if e.Metric == Money && e.Want.USD <= e.Available.USD {
		// Nothing priced was refused: spend reached the cap.
		return fmt.Sprintf("insufficient budget: %s: %s of %s spent, its hard cap is reached", where, n.Spent.USD, n.Caps.USD)
	}
	if e.Metric == Money {
		return fmt.Sprintf("insufficient budget: %s: %s of %s spent, %s left; the call needs up to %s",
			where, n.Spent.USD, n.Caps.USD, e.Available.USD, e.Want.USD)
	}
	return fmt.Sprintf("insufficient budget: %s: %d of %d tokens spent, %d left; the call needs up to %d",
		where, n.Spent.Tokens, n.Caps.Tokens, e.Available.Tokens, e.Want.Tokens)
}

func (m *Manager) chain() []*Manager {
	var cs []*Manager
	for c := m; c != nil; c = c.parent {
		cs = append(cs, c)
	}
	return cs
}

// headroomLocked is what fits under this budget's hard caps after its usage
// and its open reservations.
func (m *Manager) headroomLocked() Amount {
	spent := Amount{USD: USD(m.usedLocked(Money, time.Time{})), Tokens: m.usedLocked(Tokens, time.Time{})}
	return Headroom(m.caps, spent, m.reserved)
}

// Available returns how much money and how many tokens a call could still
// reserve, across this budget and its run's. Unlimited fields mean not capped.
func (m *Manager) Available() Amount {
	cs := m.chain()
	for _, c := range cs {
		c.mu.Lock()
	}
	defer func() {
		for _, c := range cs {
			c.mu.Unlock()
		}
	}()
	a, _, _ := availableLocked(cs)
	return a
}

func availableLocked(cs []*Manager) (Amount, Scope, Scope) {
	a := Unlimited
	usdScope, tokScope := ScopeTask, ScopeTask
	for _, c := range cs {
		h := c.headroomLocked()
		if h.USD < a.USD {
			a.USD, usdScope = h.USD, c.scope
		}
		if h.Tokens < a.Tokens {
			a.Tokens, tokScope = h.Tokens, c.scope
		}
	}
	return a, usdScope, tokScope
}

// Reserve admits a call: it holds want (the call's worst-case money and
// tokens) against this budget and its run's, so that concurrent calls can
// never together pass a hard cap. Admission counts actual usage plus open
// reservations; tiers count actual usage only.
//
// It returns a *BudgetExhaustedError when a budget is already at its hard
// cap, and an *InsufficientBudgetError, saying what does fit, when want does
// not fit.
func (m *Manager) Reserve(want Amount) (*Reservation, error) {
	if want.USD < 0 || want.Tokens < 0 {
		return nil, fmt.Errorf("reserve: negative amount (%s, %d tokens)", want.USD, want.Tokens)
	}
	cs := m.chain()
	for _, c := range cs {
		c.mu.Lock()
	}
	unlock := func() {
		for _, c := range cs {
			c.mu.Unlock()
		}
	}
	for _, c := range cs {
		cnow := c.nowLocked()
		if t, _ := c.tierLocked(cnow); t == Hard {
			err := c.exhaustedLocked(cnow)
			unlock()
			return nil, err
		}
	}
	avail, usdScope, tokScope := availableLocked(cs)
	if e := short(want, avail); e != nil {
		unlock()
		// The budget short of the metric is the one that refused.
		e.Scope = tokScope
		if e.Metric == Money {
			e.Scope = usdScope
		}
		return nil, e
	}
	for _, c := range cs {
		c.reserved.USD = c.reserved.USD.Plus(want.USD)
		c.reserved.Tokens = SatAdd(c.reserved.Tokens, want.Tokens)
	}
	unlock()
	return &Reservation{m: m, held: want}, nil
}

func (m *Manager) unreserve(a Amount) {
	for c := m; c != nil; c = c.parent {
		c.mu.Lock()
		c.reserved.USD -= a.USD
		c.reserved.Tokens -= a.Tokens
		c.mu.Unlock()
	}
}

// Reserved returns what open reservations hold on this budget.
func (m *Manager) Reserved() Amount {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reserved
}

// Reservation is usage held for one call. Record the call's usage through it
// as it arrives (each recording releases as much of the hold), then Release
// what remains. It is safe for concurrent use.
type Reservation struct {
	m    *Manager
	mu   sync.Mutex
	held Amount
	done bool
}

// Held returns what the reservation still holds.
func (r *Reservation) Held() Amount {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held
}

// Record records usage of the reserved call and moves as much out of the
// hold. Usage is added before the hold shrinks, so admission never sees less
// than the truth. Usage beyond the hold is still recorded: the actual is the
// actual.
func (r *Reservation) Record(ev UsageEvent) Tier {
	t := r.m.RecordUsage(ev)
	var spent USD
	if ev.CostSource == CostReported || ev.CostSource == CostEstimated {
		spent = ev.USD
	}
	r.mu.Lock()
	dec := Amount{USD: min(r.held.USD, spent), Tokens: min(r.held.Tokens, ev.Tokens())}
	r.held.USD -= dec.USD
	r.held.Tokens -= dec.Tokens
	r.mu.Unlock()
	if dec != (Amount{}) {
		r.m.unreserve(dec)
	}
	return t
}

// Release gives back what the reservation still holds. It is safe to call
// more than once.
func (r *Reservation) Release() {
	r.mu.Lock()
	if r.done {
		r.mu.Unlock()
		return
	}
	r.done = true
	held := r.held
	r.held = Amount{}
	r.mu.Unlock()
	r.m.unreserve(held)
}

// Commit records the call's final usage and releases the rest of the hold.
func (r *Reservation) Commit(ev UsageEvent) Tier {
	t := r.Record(ev)
	r.Release()
	return t
}
