package budget

import (
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"
)

// Minutes is a wall-time threshold written in minutes, as the spec's
// timeMinutes, held as a time.Duration.
type Minutes time.Duration

// Duration returns the threshold as a time.Duration.
func (m Minutes) Duration() time.Duration { return time.Duration(m) }

func parseMinutes(s string) (Minutes, error) {
	s = strings.TrimSpace(s)
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return 0, fmt.Errorf("%q is not a number of minutes", s)
	}
	r.Mul(r, big.NewRat(int64(time.Minute), 1))
	f, _ := r.Float64()
	if f > float64(1<<62) || f < -float64(1<<62) {
		return 0, fmt.Errorf("%q minutes is out of range", s)
	}
	n, _ := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	return Minutes(n.Int64()), nil
}

// MarshalJSON writes the threshold as a JSON number of minutes.
func (m Minutes) MarshalJSON() ([]byte, error) {
	return []byte(new(big.Rat).SetFrac64(int64(m), int64(time.Minute)).FloatString(6)), nil
}

// UnmarshalJSON reads a JSON number of minutes.
func (m *Minutes) UnmarshalJSON(b []byte) error {
	if strings.HasPrefix(string(b), `"`) {
		return fmt.Errorf("want a number of minutes, got the string %s", b)
	}
	v, err := parseMinutes(string(b))
	*m = v
	return err
}

// UnmarshalYAML reads a YAML number of minutes.
func (m *Minutes) UnmarshalYAML(b []byte) error {
	s := strings.TrimSpace(string(b))
	switch strings.ToLower(s) {
	case ".nan", ".inf", "+.inf", "-.inf":
		return fmt.Errorf("%s is not a finite number", s)
	}
	if strings.HasPrefix(s, `"`) || strings.HasPrefix(s, `'`) {
		return fmt.Errorf("want a number of minutes, got the string %s", s)
	}
	v, err := parseMinutes(strings.ReplaceAll(s, "_", ""))
	*m = v
	return err
}

// Limits are the thresholds of one tier. A nil field is a metric nobody
// configured: it is not enforced, which is different from a limit of zero.
type Limits struct {
	USD         *USD     `json:"usd,omitempty" yaml:"usd,omitempty"`
	Tokens      *int64   `json:"tokens,omitempty" yaml:"tokens,omitempty"`
	TimeMinutes *Minutes `json:"timeMinutes,omitempty" yaml:"timeMinutes,omitempty"`
}

// HardLimits are the hard cap: the Limits plus the iteration cap, which is
// always present so that a hard stop by iteration is always available.
type HardLimits struct {
	USD           *USD     `json:"usd,omitempty" yaml:"usd,omitempty"`
	Tokens        *int64   `json:"tokens,omitempty" yaml:"tokens,omitempty"`
	TimeMinutes   *Minutes `json:"timeMinutes,omitempty" yaml:"timeMinutes,omitempty"`
	MaxIterations *int     `json:"maxIterations,omitempty" yaml:"maxIterations,omitempty"`
}

// Limits returns the metric thresholds of the hard tier.
func (h HardLimits) Limits() Limits {
	return Limits{USD: h.USD, Tokens: h.Tokens, TimeMinutes: h.TimeMinutes}
}

// Config is a budget in the spec's TaskBudgetConfig shape.
//
// Per metric, WARNING starts at Optimal when it is given, otherwise at
// Warning. Where both are given, Warning is the later line from which staged
// degrade actions apply (see Status.PastWarningLine).
type Config struct {
	Optimal Limits     `json:"optimal" yaml:"optimal"`
	Warning Limits     `json:"warning" yaml:"warning"`
	Hard    HardLimits `json:"hard" yaml:"hard"`
}

// ValidationError names the field of a budget that is wrong and why.
type ValidationError struct {
	Field string // dotted path, e.g. "hard.usd"
	Msg   string
}

func (e *ValidationError) Error() string { return e.Field + ": " + e.Msg }

// Validate checks the config against the spec: every threshold finite and
// greater than zero, optimal <= warning <= hard for each metric where given,
// and hard.maxIterations an integer of at least 1. All problems are returned,
// joined, each a *ValidationError.
func (c Config) Validate() error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, &ValidationError{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	tiers := []struct {
		name string
		l    Limits
	}{{"optimal", c.Optimal}, {"warning", c.Warning}, {"hard", c.Hard.Limits()}}
	for _, t := range tiers {
		if t.l.USD != nil && *t.l.USD <= 0 {
			add(t.name+".usd", "must be greater than 0, got %s", t.l.USD.Decimal())
		}
		if t.l.Tokens != nil && *t.l.Tokens <= 0 {
			add(t.name+".tokens", "must be greater than 0, got %d", *t.l.Tokens)
		}
		if t.l.TimeMinutes != nil && *t.l.TimeMinutes <= 0 {
			add(t.name+".timeMinutes", "must be greater than 0, got %s", minutesText(*t.l.TimeMinutes))
		}
	}
	switch {
	case c.Hard.MaxIterations == nil:
		add("hard.maxIterations", "is required: an integer of at least 1")
	case *c.Hard.MaxIterations < 1:
		add("hard.maxIterations", "must be an integer of at least 1, got %d", *c.Hard.MaxIterations)
	}
	for _, m := range []Metric{Money, Tokens, Time} {
		vals := []struct {
			tier string
			v    *int64
		}{
			{"optimal", c.Optimal.value(m)},
			{"warning", c.Warning.value(m)},
			{"hard", c.Hard.Limits().value(m)},
		}
		for i := 0; i < len(vals); i++ {
			for j := i + 1; j < len(vals); j++ {
				a, b := vals[i], vals[j]
				if a.v != nil && b.v != nil && *a.v > *b.v && *a.v > 0 && *b.v > 0 {
					add(b.tier+"."+m.configKey(), "must be at least %s.%s (%s), got %s",
						a.tier, m.configKey(), m.Format(*a.v), m.Format(*b.v))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// value returns the threshold of metric m as an int64 in the metric's unit
// (nano-USD, tokens, nanoseconds), or nil when not configured.
func (l Limits) value(m Metric) *int64 {
	switch m {
	case Money:
		if l.USD != nil {
			v := int64(*l.USD)
			return &v
		}
	case Tokens:
		return l.Tokens
	case Time:
		if l.TimeMinutes != nil {
			v := int64(*l.TimeMinutes)
			return &v
		}
	}
	return nil
}

func minutesText(m Minutes) string {
	b, _ := m.MarshalJSON()
	return strings.TrimRight(strings.TrimRight(string(b), "0"), ".")
}

// Threshold returns the threshold of a metric at a tier in the metric's unit
// (nano-USD, tokens, nanoseconds, iterations), and whether it is configured.
// Iterations have only a hard threshold.
func (c Config) Threshold(t Tier, m Metric) (int64, bool) {
	var v *int64
	switch {
	case m == Iterations && t == Hard && c.Hard.MaxIterations != nil:
		n := int64(*c.Hard.MaxIterations)
		v = &n
	case m == Iterations:
	case t == Optimal:
		v = c.Optimal.value(m)
	case t == Warning:
		v = c.Warning.value(m)
	case t == Hard:
		v = c.Hard.Limits().value(m)
	}
	if v == nil {
		return 0, false
	}
	return *v, true
}

// MetricTier is the tier of one metric at a given use, by the spec's rule:
// HARD from the hard threshold, WARNING from optimal (or warning when
// optimal is absent), else OPTIMAL.
func (c Config) MetricTier(m Metric, used int64) Tier {
	if h, ok := c.Threshold(Hard, m); ok && used >= h {
		return Hard
	}
	start, ok := c.Threshold(Optimal, m)
	if !ok {
		start, ok = c.Threshold(Warning, m)
	}
	if ok && used >= start {
		return Warning
	}
	return Optimal
}
