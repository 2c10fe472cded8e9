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
	// Forecast, on the warning tier only, is a trigger read from the
	// spend forecast rather than from spend: "hard" enters WARNING (and
	// its degrade policy) once the forecast's upper bound passes the hard
	// money cap, before the spend gets there. Empty: off.
	Forecast ForecastTrigger `json:"forecast,omitempty" yaml:"forecast,omitempty"`
}

// ForecastTrigger is what the forecast of a task's final spend is compared
// with to enter WARNING early (warning.forecast).
type ForecastTrigger string

// ForecastHard: WARNING once the forecast's upper bound passes hard.usd,
// or the tokens forecast's passes hard.tokens.
const ForecastHard ForecastTrigger = "hard"

// OnHard is what happens to the call in flight when a hard cap is crossed.
type OnHard string

const (
	// OnHardCut cancels the call in flight at once: the spec's "stop
	// immediately", and the default (also the empty value).
	OnHardCut OnHard = "cut"
	// OnHardFinishCall lets the call in flight end and books all it
	// spent, then stops: the task is BLOCKED all the same, nothing is
	// retried, and the next iteration is refused with
	// BudgetExhaustedError. It trades an overshoot of up to one call's
	// spend for that call's work.
	OnHardFinishCall OnHard = "finish-call"
)

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
	// OnHard is what crossing a hard cap does to the call in flight
	// (OnHardCut when empty).
	OnHard OnHard `json:"onHard,omitempty" yaml:"onHard,omitempty"`
	// StuckAfter, when set, ends the task (BLOCKED, reason "stuck") once
	// the same validators have failed this many iterations in a row with
	// no change to the workspace: iterations that change nothing are
	// money spent for nothing. Nil: off.
	StuckAfter *int `json:"stuckAfter,omitempty" yaml:"stuckAfter,omitempty"`
	// Forecast says where the history the spend forecast is read from
	// comes from; nil: the project's own database.
	Forecast *ForecastSource `json:"forecastFrom,omitempty" yaml:"forecastFrom,omitempty"`
}

// ForecastSource is the history a task's spend forecast is fitted on.
type ForecastSource struct {
	// Corpus is a replay corpus (JSON lines, as `purser advise` reads);
	// the runs of the task's backend type and model are used when it has
	// any, else all its runs. A relative path is the task file's.
	Corpus string `json:"corpus,omitempty" yaml:"corpus,omitempty"`
}

// FinishCall reports whether the call in flight is let end at the hard cap.
func (c Config) FinishCall() bool { return c.OnHard == OnHardFinishCall }

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
	for _, t := range tiers {
		for _, m := range thresholdMetrics {
			if th := c.limits(m).at(t); th.set && th.v <= 0 {
				add(fieldName(t, m), "must be greater than 0, got %s", m.configText(th.v))
			}
		}
	}
	switch {
	case c.Hard.MaxIterations == nil:
		add(fieldName(Hard, Iterations), "is required: an integer of at least 1")
	case *c.Hard.MaxIterations < 1:
		add(fieldName(Hard, Iterations), "must be an integer of at least 1, got %d", *c.Hard.MaxIterations)
	}
	switch c.Warning.Forecast {
	case "":
	case ForecastHard:
		if c.Hard.USD == nil && c.Hard.Tokens == nil {
			add("warning.forecast", "needs hard.usd or hard.tokens: the forecast's upper bound is compared with it")
		}
	default:
		add("warning.forecast", "must be %q, got %q", ForecastHard, c.Warning.Forecast)
	}
	if c.Optimal.Forecast != "" {
		add("optimal.forecast", "is not a field of the optimal tier: the forecast trigger is warning.forecast")
	}
	switch c.OnHard {
	case "", OnHardCut, OnHardFinishCall:
	default:
		add("onHard", "must be %q or %q, got %q", OnHardCut, OnHardFinishCall, c.OnHard)
	}
	if c.StuckAfter != nil && *c.StuckAfter < 1 {
		add("stuckAfter", "must be an integer of at least 1, got %d", *c.StuckAfter)
	}
	if c.Forecast != nil && c.Forecast.Corpus == "" {
		add("forecastFrom.corpus", "is required in forecastFrom: the path of a replay corpus")
	}
	for _, m := range thresholdMetrics {
		l := c.limits(m)
		for i, lower := range tiers {
			for _, upper := range tiers[i+1:] {
				a, b := l.at(lower), l.at(upper)
				if a.set && b.set && a.v > b.v && a.v > 0 && b.v > 0 {
					add(fieldName(upper, m), "must be at least %s (%s), got %s", fieldName(lower, m), m.Format(a.v), m.Format(b.v))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// tiers are the tiers in order; thresholdMetrics the metrics configured
// with a threshold per tier (iterations have only a hard cap).
var (
	tiers            = []Tier{Optimal, Warning, Hard}
	thresholdMetrics = []Metric{Money, Tokens, Time}
)

// fieldName is a threshold's dotted path in a config, e.g. "hard.usd".
func fieldName(t Tier, m Metric) string { return t.String() + "." + m.configKey() }

// Field is a numeric field of a budget config.
type Field struct {
	Path  string // dotted, e.g. "hard.usd"
	Whole bool   // only whole numbers (tokens, iterations)
}

// Fields lists the numeric fields of a Config, for a reader that checks
// their syntax before decoding (and can say where a bad one is).
func Fields() []Field {
	var out []Field
	for _, t := range tiers {
		for _, m := range thresholdMetrics {
			out = append(out, Field{Path: fieldName(t, m), Whole: m == Tokens})
		}
	}
	return append(out, Field{Path: fieldName(Hard, Iterations), Whole: true}, Field{Path: "stuckAfter", Whole: true})
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

// configText writes a threshold as it is written in a config: dollars and
// minutes as plain numbers.
func (m Metric) configText(v int64) string {
	switch m {
	case Money:
		return USD(v).Decimal()
	case Time:
		return minutesText(Minutes(v))
	}
	return fmt.Sprint(v)
}

func minutesText(m Minutes) string {
	b, _ := m.MarshalJSON()
	return strings.TrimRight(strings.TrimRight(string(b), "0"), ".")
}

// threshold is one configured limit, in its metric's unit; unset is not
// enforced, which is different from zero.
type threshold struct {
	v   int64
	set bool
}

func thresholdOf(v *int64) threshold {
	if v == nil {
		return threshold{}
	}
	return threshold{v: *v, set: true}
}

// metricLimits are one metric's thresholds. The spec's per-metric rules are
// written here, once: the Manager enforces them, and Config answers with
// them.
type metricLimits struct{ optimal, warning, hard threshold }

// limits returns a metric's thresholds. Iterations have only a hard one.
func (c Config) limits(m Metric) metricLimits {
	if m == Iterations {
		if c.Hard.MaxIterations == nil {
			return metricLimits{}
		}
		return metricLimits{hard: threshold{v: int64(*c.Hard.MaxIterations), set: true}}
	}
	return metricLimits{optimal: thresholdOf(c.Optimal.value(m)), warning: thresholdOf(c.Warning.value(m)),
		hard: thresholdOf(c.Hard.Limits().value(m))}
}

func (l metricLimits) at(t Tier) threshold {
	switch t {
	case Optimal:
		return l.optimal
	case Warning:
		return l.warning
	case Hard:
		return l.hard
	}
	return threshold{}
}

// tier is the spec's per-metric rule: HARD from the hard threshold, WARNING
// from optimal (or from warning when optimal is absent), else OPTIMAL.
func (l metricLimits) tier(used int64) Tier {
	if l.hard.set && used >= l.hard.v {
		return Hard
	}
	if start := l.warningStart(); start.set && used >= start.v {
		return Warning
	}
	return Optimal
}

func (l metricLimits) warningStart() threshold {
	if l.optimal.set {
		return l.optimal
	}
	return l.warning
}

// pastWarningLine: staged degrade actions apply from the warning threshold
// (or, with none, the optimal one).
func (l metricLimits) pastWarningLine(used int64) bool {
	line := l.warning
	if !line.set {
		line = l.optimal
	}
	return line.set && used >= line.v
}

func (l metricLimits) configured() bool { return l.optimal.set || l.warning.set || l.hard.set }

// Threshold returns the threshold of a metric at a tier in the metric's unit
// (nano-USD, tokens, nanoseconds, iterations), and whether it is configured.
// Iterations have only a hard threshold.
func (c Config) Threshold(t Tier, m Metric) (int64, bool) {
	th := c.limits(m).at(t)
	return th.v, th.set
}

// WarningStart returns where a metric's WARNING starts, in its unit: its
// optimal line, or its warning line where no optimal one is given; false
// when neither is configured. Callers that explain a tier use it, so the
// rule stays the one the tier arithmetic applies.
func (c Config) WarningStart(m Metric) (int64, bool) {
	th := c.limits(m).warningStart()
	return th.v, th.set
}

// MetricTier is the tier of one metric at a given use, by the spec's rule
// (see metricLimits.tier).
func (c Config) MetricTier(m Metric, used int64) Tier { return c.limits(m).tier(used) }
