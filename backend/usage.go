package backend

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/pricing"
)

// MaxEventLine is the longest events line accepted; a longer one is garbage.
const MaxEventLine = 1 << 20

// Usage is one usage event as written in an events file (JSON Lines), in
// an exec agent's usage file and in a sim script's step. Every field is optional.
type Usage struct {
	InputTokens      int64 `json:"inputTokens,omitempty" yaml:"inputTokens,omitempty"`
	OutputTokens     int64 `json:"outputTokens,omitempty" yaml:"outputTokens,omitempty"`
	CacheReadTokens  int64 `json:"cacheReadTokens,omitempty" yaml:"cacheReadTokens,omitempty"`
	CacheWriteTokens int64 `json:"cacheWriteTokens,omitempty" yaml:"cacheWriteTokens,omitempty"`
	// CacheWrite1hTokens is the part of the cache writes held for one hour
	// (billed higher); ServiceTier the provider's service tier (priority,
	// flex, batch; empty is standard).
	CacheWrite1hTokens int64       `json:"cacheWrite1hTokens,omitempty" yaml:"cacheWrite1hTokens,omitempty"`
	ServiceTier        string      `json:"serviceTier,omitempty" yaml:"serviceTier,omitempty"`
	CostUSD            *budget.USD `json:"costUsd,omitempty" yaml:"costUsd,omitempty"`
	Model              string      `json:"model,omitempty" yaml:"model,omitempty"`
	ElapsedMs          float64     `json:"elapsedMs,omitempty" yaml:"elapsedMs,omitempty"`
	IterationEnd       bool        `json:"iterationEnd,omitempty" yaml:"iterationEnd,omitempty"`
}

// Event turns the written form into a usage event, priced: a given costUsd
// is reported; otherwise the catalogue estimates it from the model, or it is
// unknown when the model has no price (never $0). With no catalogue, an event
// without costUsd is left unpriced.
func (u Usage) Event(prices *pricing.Catalogue) (budget.UsageEvent, error) {
	if math.IsNaN(u.ElapsedMs) || math.IsInf(u.ElapsedMs, 0) || u.ElapsedMs > float64(math.MaxInt64/int64(time.Millisecond)) {
		return budget.UsageEvent{}, fmt.Errorf("elapsedMs: out of range")
	}
	ev := budget.UsageEvent{
		InputTokens:        u.InputTokens,
		OutputTokens:       u.OutputTokens,
		CacheReadTokens:    u.CacheReadTokens,
		CacheWriteTokens:   u.CacheWriteTokens,
		CacheWrite1hTokens: u.CacheWrite1hTokens,
		ServiceTier:        u.ServiceTier,
		Model:              u.Model,
		Elapsed:            time.Duration(u.ElapsedMs * float64(time.Millisecond)),
		IterationEnd:       u.IterationEnd,
	}
	if u.CostUSD != nil {
		ev.USD, ev.CostSource = *u.CostUSD, budget.CostReported
	}
	if err := ev.Validate(); err != nil {
		return budget.UsageEvent{}, err
	}
	if prices == nil {
		return ev, nil // priced later, by whoever records it
	}
	return prices.Estimate(ev), nil
}

// ParseEventLine reads one usage event written as a JSON object with the
// events-file fields. Unknown fields are refused by name.
func ParseEventLine(b []byte, prices *pricing.Catalogue) (budget.UsageEvent, error) {
	if b[0] != '{' {
		return budget.UsageEvent{}, errors.New("want a JSON object with usage fields")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	// costUsd and the token counts are read raw so that every JSON number
	// form is read exactly (1e3 tokens, 5e-05 dollars), and errors name the
	// field.
	var w struct {
		Usage
		CostUSD          json.RawMessage `json:"costUsd"`
		InputTokens      json.RawMessage `json:"inputTokens"`
		OutputTokens     json.RawMessage `json:"outputTokens"`
		CacheReadTokens  json.RawMessage `json:"cacheReadTokens"`
		CacheWriteTokens json.RawMessage `json:"cacheWriteTokens"`
	}
	if err := dec.Decode(&w); err != nil {
		return budget.UsageEvent{}, jsonFieldError(err)
	}
	if dec.More() {
		return budget.UsageEvent{}, errors.New("more than one JSON value on the line")
	}
	u := w.Usage
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  *int64
	}{
		{"inputTokens", w.InputTokens, &u.InputTokens},
		{"outputTokens", w.OutputTokens, &u.OutputTokens},
		{"cacheReadTokens", w.CacheReadTokens, &u.CacheReadTokens},
		{"cacheWriteTokens", w.CacheWriteTokens, &u.CacheWriteTokens},
	} {
		if len(f.raw) == 0 || string(f.raw) == "null" {
			continue
		}
		n, err := wholeJSONNumber(f.raw)
		if err != nil {
			return budget.UsageEvent{}, fmt.Errorf("%s: %w", f.name, err)
		}
		*f.dst = n
	}
	if len(w.CostUSD) > 0 && string(w.CostUSD) != "null" {
		var usd budget.USD
		if err := usd.UnmarshalJSON(w.CostUSD); err != nil {
			return budget.UsageEvent{}, fmt.Errorf("costUsd: %w", err)
		}
		u.CostUSD = &usd
	}
	return u.Event(prices)
}

// wholeJSONNumber reads a JSON value that must be a whole number in any
// JSON number form: 1000, 1e3 and 1000.0 alike.
func wholeJSONNumber(raw json.RawMessage) (int64, error) {
	s := string(raw)
	if c := s[0]; c != '-' && (c < '0' || c > '9') {
		if c == '"' {
			return 0, fmt.Errorf("want a whole number, got string %s", s)
		}
		return 0, fmt.Errorf("want a whole number, got %s", s)
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	r, err := budget.ParseDecimal(s)
	if err != nil {
		return 0, err
	}
	if !r.IsInt() {
		return 0, fmt.Errorf("want a whole number, got %s", s)
	}
	if !r.Num().IsInt64() {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return r.Num().Int64(), nil
}

// jsonFieldError rewords encoding/json's errors to lead with the field.
func jsonFieldError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		want := te.Type.String()
		switch want {
		case "int64":
			want = "a whole number"
		case "float64":
			want = "a number"
		case "budget.USD":
			want = "a number of dollars"
		}
		field := te.Field[strings.LastIndex(te.Field, ".")+1:] // the embedded struct's name is noise
		return fmt.Errorf("%s: want %s, got %s", field, want, te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("not valid JSON (at byte %d): %v", se.Offset, err)
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	return errors.New(msg)
}
