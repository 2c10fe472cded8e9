package budget

// This file is admission's arithmetic, written once: the caps a config
// sets, the headroom under them, whether a call fits, and how far a call's
// output shrinks to fit. The Manager (one process), the stores (a run or a
// named budget shared by many processes) and the engine all decide with
// these, so that the same spend and holds give the same answer everywhere.

// CapsOf is a budget's hard caps on money and tokens as an Amount, Unlimited
// in each metric it does not cap. Admission reserves against money and
// tokens only (time and iterations are checked when they are spent), so
// this is the whole of what a hold is measured against.
func CapsOf(cfg Config) Amount {
	caps := Unlimited
	if cfg.Hard.USD != nil {
		caps.USD = *cfg.Hard.USD
	}
	if cfg.Hard.Tokens != nil {
		caps.Tokens = *cfg.Hard.Tokens
	}
	return caps
}

// Amount is the money and tokens of the totals: what admission counts as
// spent (list prices on flat-rate plans are not money spent).
func (t Totals) Amount() Amount { return Amount{USD: t.USD, Tokens: t.Tokens} }

// Min is what fits in both a and b: the lesser of each metric. A call
// admitted against several budgets (a task, its run, named budgets) is
// bounded by the tightest of each.
func (a Amount) Min(b Amount) Amount {
	return Amount{USD: min(a.USD, b.USD), Tokens: min(a.Tokens, b.Tokens)}
}

// Headroom is what a new hold could still take under caps after spent
// (usage recorded) and held (open reservations): never negative, so an
// overspent budget has nothing left rather than a debt that a later raise
// would silently absorb. A metric left Unlimited in caps stays Unlimited,
// whatever was spent. Subtraction saturates: absurd figures cannot wrap
// into room.
func Headroom(caps, spent, held Amount) Amount {
	h := caps
	if caps.USD != UnlimitedUSD {
		h.USD = max(USD(SatSub(SatSub(int64(caps.USD), int64(spent.USD)), int64(held.USD))), 0)
	}
	if caps.Tokens != Unlimited.Tokens {
		h.Tokens = max(SatSub(SatSub(caps.Tokens, spent.Tokens), held.Tokens), 0)
	}
	return h
}

// short is the one "does it fit" rule: nil when want fits in headroom, else
// the refusal naming the metric that is short, money before tokens (a
// caller reports one reason, and money is the one people act on).
func short(want, headroom Amount) *InsufficientBudgetError {
	switch {
	case want.USD > headroom.USD:
		return &InsufficientBudgetError{Metric: Money, Want: want, Available: headroom}
	case want.Tokens > headroom.Tokens:
		return &InsufficientBudgetError{Metric: Tokens, Want: want, Available: headroom}
	}
	return nil
}

// FitsIn reports whether a fits in headroom: every metric within it.
func (a Amount) FitsIn(headroom Amount) bool { return short(a, headroom) == nil }

// Fit returns nil when want fits in headroom, else an
// *InsufficientBudgetError of scope saying which metric is short and what
// does fit (it matches ErrInsufficientBudget), so that a caller may shrink
// its call to Available and try again.
func Fit(scope Scope, want, headroom Amount) error {
	if e := short(want, headroom); e != nil {
		e.Scope = scope
		return e
	}
	return nil
}

// FitNamed is Fit for the named budget name: its refusal has ScopeNamed
// and says which budget refused.
func FitNamed(name string, want, headroom Amount) error {
	if e := short(want, headroom); e != nil {
		e.Scope, e.Name = ScopeNamed, name
		return e
	}
	return nil
}

// MinOutputTokens is the least output worth making a call for: below it a
// call is refused rather than shrunk further.
const MinOutputTokens = 256

// ClampOutput shrinks a call's output until its worst case fits in
// headroom, so that a budget near its cap still admits a smaller call
// instead of stopping. The output starts at what the tokens' headroom
// leaves after input (reserve when tokens are not capped) and shrinks by a
// quarter at a time; worst prices a call of a given output. It returns the
// worst case and output that fit, or, when even MinOutputTokens does not,
// an *InsufficientBudgetError (scope left for the caller to say) for the
// least worthwhile call: on money when its money does not fit, else on
// tokens.
func ClampOutput(headroom Amount, input, reserve int64, worst func(output int64) Amount) (Amount, int64, error) {
	out := SatSub(headroom.Tokens, input)
	if headroom.Tokens == Unlimited.Tokens {
		out = reserve
	}
	for out >= MinOutputTokens {
		if want := worst(out); want.FitsIn(headroom) {
			return want, out, nil
		}
		out = out * 3 / 4
	}
	least := worst(MinOutputTokens)
	metric := Tokens
	if least.USD > headroom.USD {
		metric = Money
	}
	return Amount{}, 0, &InsufficientBudgetError{Metric: metric, Want: least, Available: headroom}
}

// Reached is the first metric, money before tokens, whose cap in caps the
// spend has reached (NoMetric when none has). A budget whose cap is reached
// admits nothing more, even a call that admission cannot price: its
// dollars would only be known once spent.
func Reached(caps, spent Amount) Metric {
	switch {
	case caps.USD != UnlimitedUSD && spent.USD >= caps.USD:
		return Money
	case caps.Tokens != Unlimited.Tokens && spent.Tokens >= caps.Tokens:
		return Tokens
	}
	return NoMetric
}
