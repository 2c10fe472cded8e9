// Command priceaudit compares Purser's built-in price table with LiteLLM's
// reference file, model by model under the names agents send, and prints
// how many are priced equal, differently, or not at all:
//
//	go run ./pricing/cmd/priceaudit -reference model_prices_and_context_window.json [-v]
//
// With -v it lists every model that is not priced equal, and by which key.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/pricing/builtingen"
)

func main() {
	ref := flag.String("reference", "pricing/testdata/litellm_builtin.json", "a LiteLLM model_prices_and_context_window.json")
	verbose := flag.Bool("v", false, "list the models not priced equal")
	table := flag.String("builtin", "", "audit this LiteLLM-format table in place of the built-in one (e.g. an earlier builtin.json)")
	flag.Parse()
	cat, name := pricing.Builtin(), fmt.Sprintf("the built-in table (%s, read %s)", pricing.BuiltinReference, pricing.BuiltinReadOn)
	if *table != "" {
		c, err := pricing.LoadLiteLLM(*table)
		if err != nil {
			fmt.Fprintln(os.Stderr, "priceaudit:", err)
			os.Exit(1)
		}
		cat, name = c, *table
	}
	data, err := os.ReadFile(*ref)
	if err != nil {
		fmt.Fprintln(os.Stderr, "priceaudit:", err)
		os.Exit(1)
	}
	rep, err := builtingen.Audit(data, cat)
	if err != nil {
		fmt.Fprintln(os.Stderr, "priceaudit:", err)
		os.Exit(1)
	}
	if *verbose {
		for _, r := range rep.Rows {
			if r.Verdict != builtingen.Equal {
				fmt.Printf("%-9s %s (reference %s, built-in %s)\n", r.Verdict, r.Name, r.Key, r.Builtin)
			}
		}
	}
	fmt.Printf("%s against %s\n", name, *ref)
	fmt.Printf("%d of %d models priced equal under the names agents send; %d equal where the reference prices, with service tiers it lacks; %d priced differently; %d not priced\n",
		rep.Count(builtingen.Equal), len(rep.Rows), rep.Count(builtingen.Wider), rep.Count(builtingen.Different), rep.Count(builtingen.Unknown))
}
