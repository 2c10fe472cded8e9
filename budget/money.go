package budget

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// USD is an amount of money in nano-dollars (1e-9 USD). Money is kept as an
// integer so that sums are exact: thirty events of $0.10 add up to exactly
// $3.00, which a running float64 does not.
type USD int64

// NanosPerDollar is the number of USD units in one dollar.
const NanosPerDollar = 1_000_000_000

// UnlimitedUSD stands for "no money limit" in headroom figures.
const UnlimitedUSD USD = math.MaxInt64

// Dollars returns a whole-dollar amount as USD.
func Dollars(d int64) USD { return USD(d * NanosPerDollar) }

// ParseUSD reads a decimal dollar amount such as "0.10", "3", "1.5e-3" exactly.
// It refuses NaN, infinities and amounts finer than a nano-dollar would lose.
func ParseUSD(s string) (USD, error) {
	s = strings.TrimSpace(s)
	r, err := ParseDecimal(s)
	if err != nil {
		return 0, err
	}
	r.Mul(r, big.NewRat(NanosPerDollar, 1))
	// Round half away from zero to the nearest nano-dollar.
	num, den := r.Num(), r.Denom()
	q, m := new(big.Int).QuoRem(num, den, new(big.Int))
	if new(big.Int).Mul(new(big.Int).Abs(m), big.NewInt(2)).Cmp(den) >= 0 {
		if num.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	if !q.IsInt64() {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return USD(q.Int64()), nil
}

// MaxExponent bounds the decimal exponent ParseDecimal accepts: big.Rat
// computes 10^exp exactly, and 1e1000000 alone takes a fifth of a second,
// which a usage line an agent writes must not cost.
const MaxExponent = 1000

// ParseDecimal reads a decimal number ("0.10", "3", "5e-05") exactly. It
// refuses what is not a number and exponents beyond ±MaxExponent.
func ParseDecimal(s string) (*big.Rat, error) {
	if i := strings.IndexAny(s, "eE"); i >= 0 && !strings.HasPrefix(s, "0x") && !strings.HasPrefix(s, "0X") {
		if e, err := strconv.ParseInt(s[i+1:], 10, 64); err != nil || e > MaxExponent || e < -MaxExponent {
			return nil, fmt.Errorf("%q is out of range", s)
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, fmt.Errorf("%q is not a number", s)
	}
	return r, nil
}

// USDFromFloat converts a float dollar figure, as reported by a backend, to
// USD by rounding to the nearest nano-dollar. Use it once per reported figure,
// never to accumulate.
func USDFromFloat(f float64) (USD, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, errors.New("not a finite number")
	}
	n := math.Round(f * NanosPerDollar)
	if n > math.MaxInt64 || n < math.MinInt64 {
		return 0, errors.New("out of range")
	}
	return USD(n), nil
}

// Plus returns u+v, saturating at the largest (or smallest) USD instead of
// wrapping.
func (u USD) Plus(v USD) USD { return USD(SatAdd(int64(u), int64(v))) }

// SatAdd returns a+b, saturating at math.MaxInt64 or math.MinInt64 instead
// of wrapping: a usage sum that wrapped would go negative and turn a budget
// at HARD back to OPTIMAL.
func SatAdd(a, b int64) int64 {
	s := a + b
	if (s > a) != (b > 0) {
		if b > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return s
}

// SatSub returns a-b, saturating like SatAdd.
func SatSub(a, b int64) int64 {
	if b == math.MinInt64 {
		if a >= 0 {
			return math.MaxInt64
		}
		return a - b
	}
	return SatAdd(a, -b)
}

// Float returns the amount in dollars as a float64, for display and
// percentages only.
func (u USD) Float() float64 { return float64(u) / NanosPerDollar }

// Decimal returns the exact amount in dollars as a decimal string without
// trailing zeros: "3", "0.0095", "-1.25".
func (u USD) Decimal() string {
	n := int64(u)
	sign := ""
	if n < 0 {
		sign = "-"
	}
	whole := uint64(n / NanosPerDollar)
	frac := uint64(n % NanosPerDollar)
	if n < 0 {
		whole = uint64(-(n / NanosPerDollar))
		frac = uint64(-(n % NanosPerDollar))
	}
	if frac == 0 {
		return sign + strconv.FormatUint(whole, 10)
	}
	f := strings.TrimRight(fmt.Sprintf("%09d", frac), "0")
	return sign + strconv.FormatUint(whole, 10) + "." + f
}

// String formats the amount for people: "$1.25", "$0.0095". At least cents
// are shown; finer digits only where they are not zero.
func (u USD) String() string {
	d := u.Decimal()
	neg := strings.HasPrefix(d, "-")
	d = strings.TrimPrefix(d, "-")
	whole, frac, _ := strings.Cut(d, ".")
	for len(frac) < 2 {
		frac += "0"
	}
	s := "$" + whole + "." + frac
	if neg {
		s = "-" + s
	}
	return s
}

// FormatUSD renders a dollar figure with where it came from, the way Purser
// shows money to people everywhere: "$1.20 (reported)", "$0.42 (estimated)",
// "≥ $1.03 (partial: some unknown)" for a lower bound, and "unknown" for
// money nobody knows — never $0. Nothing spent (zero, with nothing unknown)
// is "$0.00".
func FormatUSD(amount USD, source USDSource) string {
	switch {
	case source == SourceUnknown:
		return "unknown"
	case source == SourcePartial:
		return "≥ " + amount.String() + " (partial: some unknown)"
	case amount == 0 && source == SourceReported:
		return amount.String()
	}
	return amount.String() + " (" + source.String() + ")"
}

// FormatListUSD renders list-price dollars (usage on a flat-rate plan) for
// people: "$1.23 (list)", never to be read as money spent.
func FormatListUSD(amount USD) string { return amount.String() + " (list)" }

// MarshalJSON writes the amount as an exact JSON number of dollars.
func (u USD) MarshalJSON() ([]byte, error) { return []byte(u.Decimal()), nil }

// UnmarshalJSON reads a JSON number of dollars exactly.
func (u *USD) UnmarshalJSON(b []byte) error {
	s := string(b)
	if strings.HasPrefix(s, `"`) {
		return fmt.Errorf("want a number of dollars, got the string %s", s)
	}
	v, err := ParseUSD(s)
	if err != nil {
		return err
	}
	*u = v
	return nil
}

// UnmarshalYAML reads a YAML number of dollars exactly (it satisfies the
// bytes-unmarshaler interface of YAML libraries, so budget needs none).
func (u *USD) UnmarshalYAML(b []byte) error {
	s := strings.TrimSpace(string(b))
	switch strings.ToLower(s) {
	case ".nan", ".inf", "+.inf", "-.inf":
		return fmt.Errorf("%s is not a finite number", s)
	}
	if strings.HasPrefix(s, `"`) || strings.HasPrefix(s, `'`) {
		return fmt.Errorf("want a number of dollars, got the string %s", s)
	}
	v, err := ParseUSD(strings.ReplaceAll(s, "_", ""))
	if err != nil {
		return err
	}
	*u = v
	return nil
}
