package builtingen_test

import (
	"os"
	"strings"
	"testing"

	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/pricing/builtingen"
)

// The price audit (go run ./pricing/cmd/priceaudit): against the reference
// entries it was generated from, the built-in table prices every model
// equal under the names agents send (the Gemini and DeepSeek entries' names
// without their gemini/ and deepseek/ prefixes, the dated Claude entries
// under their dated names); a reference that prices one differently, or a
// model the table lacks, is counted as such.
func TestAuditCountsAgainstTheReference(t *testing.T) {
	ref, err := os.ReadFile("../testdata/litellm_builtin.json")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := builtingen.Audit(ref, pricing.Builtin())
	if err != nil {
		t.Fatal(err)
	}
	if n := rep.Count(builtingen.Equal); n != len(builtingen.Models) || n != len(rep.Rows) {
		t.Fatalf("%d of %d equal, want all %d built-in models: %+v", n, len(rep.Rows), len(builtingen.Models), rep.Rows)
	}
	doctored := strings.Replace(string(ref), `"output_cost_per_token": 1.5e-05`, `"output_cost_per_token": 1.6e-05`, 1)
	doctored = strings.Replace(doctored, "{\n", "{\n  \"gpt-9\": {\"litellm_provider\": \"openai\", \"mode\": \"chat\", \"input_cost_per_token\": 1e-06, \"output_cost_per_token\": 2e-06},\n", 1)
	rep, err = builtingen.Audit([]byte(doctored), pricing.Builtin())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Count(builtingen.Different) != 1 || rep.Count(builtingen.Unknown) != 1 {
		t.Fatalf("doctored reference: %d different, %d unknown; want 1 and 1", rep.Count(builtingen.Different), rep.Count(builtingen.Unknown))
	}
}
