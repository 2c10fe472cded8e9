package budget

import (
	"encoding/json"
	"strconv"
)

// Percent is a share of a threshold, or nothing where that threshold is not
// configured (the spec's null).
type Percent struct {
	Value float64
	Valid bool
}

// MarshalJSON writes the percentage, or null when not configured.
func (p Percent) MarshalJSON() ([]byte, error) {
	if !p.Valid {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, p.Value, 'f', -1, 64), nil
}

// UnmarshalJSON reads a percentage or null.
func (p *Percent) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*p = Percent{}
		return nil
	}
	p.Valid = true
	return json.Unmarshal(b, &p.Value)
}

// statusJSON is the spec's BudgetStatus with its camelCase names, plus the
// provenance of usedUsd.
type statusJSON struct {
	Tier               Tier      `json:"tier"`
	UsedUSD            USD       `json:"usedUsd"`
	UsedTokens         int64     `json:"usedTokens"`
	UsedTimeMs         int64     `json:"usedTimeMs"`
	UsedIterations     int       `json:"usedIterations"`
	USDPctOfOptimal    Percent   `json:"usdPctOfOptimal"`
	USDPctOfHard       Percent   `json:"usdPctOfHard"`
	TokensPctOfOptimal Percent   `json:"tokensPctOfOptimal"`
	TokensPctOfHard    Percent   `json:"tokensPctOfHard"`
	TimePctOfOptimal   Percent   `json:"timePctOfOptimal"`
	TimePctOfHard      Percent   `json:"timePctOfHard"`
	IsInWarning        bool      `json:"isInWarning"`
	IsAtHardCap        bool      `json:"isAtHardCap"`
	USDSource          USDSource `json:"usdSource"`
	// ListUSD is present only when some usage was on a flat-rate plan.
	ListUSD *USD `json:"listUsd,omitempty"`
}

func listUSD(v USD) *USD {
	if v == 0 {
		return nil
	}
	return &v
}

// MarshalJSON writes the status in the spec's BudgetStatus shape, plus
// usdSource and, where usage was on a flat-rate plan, listUsd: its dollars
// at list prices, never part of usedUsd.
func (s Status) MarshalJSON() ([]byte, error) {
	return json.Marshal(statusJSON{
		Tier: s.Tier, UsedUSD: s.UsedUSD, UsedTokens: s.UsedTokens,
		UsedTimeMs: s.UsedTime.Milliseconds(), UsedIterations: s.UsedIterations,
		USDPctOfOptimal: s.USDPctOfOptimal, USDPctOfHard: s.USDPctOfHard,
		TokensPctOfOptimal: s.TokensPctOfOptimal, TokensPctOfHard: s.TokensPctOfHard,
		TimePctOfOptimal: s.TimePctOfOptimal, TimePctOfHard: s.TimePctOfHard,
		IsInWarning: s.IsInWarning, IsAtHardCap: s.IsAtHardCap, USDSource: s.USDSource, ListUSD: listUSD(s.ListUSD),
	})
}
