package builtingen

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/purser-dev/purser/pricing"
)

// Verdict is how the built-in table prices one model against the reference.
type Verdict string

// The verdicts of an audit.
const (
	Equal     Verdict = "equal"     // priced by the built-in table exactly as the reference prices it
	Different Verdict = "different" // priced, at other rates
	// Wider: priced equal wherever the reference entry prices, and the
	// built-in also prices service tiers that entry lacks (a dated name
	// priced as its undated model, whose entry has them).
	Wider   Verdict = "wider"
	Unknown Verdict = "unknown" // not priced by the built-in table
)

// AuditRow is one model of an audit.
type AuditRow struct {
	Name    string // as an agent sends it
	Key     string // the reference entry
	Verdict Verdict
	Builtin string // the built-in key that priced it ("" when none)
}

// AuditReport is an audit's rows, by name.
type AuditReport struct {
	Rows []AuditRow
}

// Count is how many rows have the verdict.
func (r AuditReport) Count(v Verdict) int {
	n := 0
	for _, row := range r.Rows {
		if row.Verdict == v {
			n++
		}
	}
	return n
}

// agentProviders are the providers whose models an agent CLI or Purser's
// OpenAI-compatible backend names to the provider's own API, and the
// prefix their reference keys carry (the name sent is the key without it).
var agentProviders = map[string]string{"anthropic": "", "openai": "", "gemini": "gemini/", "deepseek": "deepseek/"}

// Audit compares the built-in table with a LiteLLM reference file, model by
// model, under the names agents send: every chat, completion or responses
// entry of Anthropic, OpenAI, Google AI Studio (gemini/…, named without the
// prefix) and DeepSeek (deepseek/…, likewise) that Purser can price is
// priced from the reference alone and by the built-in table (name
// matching included, as a call would be), and the two prices compared
// field by field: every rate, long-context tier and service tier.
func Audit(reference []byte, builtin *pricing.Catalogue) (AuditReport, error) {
	var ref map[string]json.RawMessage
	if err := json.Unmarshal(reference, &ref); err != nil {
		return AuditReport{}, fmt.Errorf("builtingen: the reference is not a JSON object: %w", err)
	}
	var out AuditReport
	seen := map[string]bool{}
	keys := make([]string, 0, len(ref))
	for k := range ref {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		var head struct {
			Provider string `json:"litellm_provider"`
			Mode     string `json:"mode"`
		}
		if json.Unmarshal(ref[key], &head) != nil {
			continue
		}
		prefix, ok := agentProviders[head.Provider]
		if !ok || !strings.HasPrefix(key, prefix) || (head.Mode != "" && head.Mode != "chat" && head.Mode != "completion" && head.Mode != "responses") {
			continue
		}
		name := strings.TrimPrefix(key, prefix)
		if strings.Contains(name, "/") || seen[name] {
			continue // another host's form (ft:…/…), or the bare twin of a prefixed key already taken
		}
		one, err := json.Marshal(map[string]json.RawMessage{name: ref[key]})
		if err != nil {
			return AuditReport{}, err
		}
		c, err := pricing.ParseLiteLLM(one, "reference")
		if err != nil {
			continue // not priced per token (images, a zero price): nothing to compare
		}
		want, ok := c.Lookup(name)
		if !ok {
			continue
		}
		seen[name] = true
		row := AuditRow{Name: name, Key: key, Verdict: Unknown}
		if got, res, ok := builtin.Resolve(name); ok {
			row.Builtin, row.Verdict = res.Key, Different
			switch {
			case reflect.DeepEqual(got.Price, want.Price):
				row.Verdict = Equal
			case widens(got.Price, want.Price):
				row.Verdict = Wider
			}
		}
		out.Rows = append(out.Rows, row)
	}
	return out, nil
}

// widens reports whether got equals want but for service tiers want lacks.
func widens(got, want pricing.Price) bool {
	for tier, p := range want.Services {
		if g, ok := got.Services[tier]; !ok || !reflect.DeepEqual(*g, *p) {
			return false
		}
	}
	got.Services, want.Services = nil, nil
	return reflect.DeepEqual(got, want)
}
