// Command genbuiltin regenerates Purser's built-in price table from
// LiteLLM's reference file:
//
//	go run ./pricing/cmd/genbuiltin -from model_prices_and_context_window.json \
//	    -reference "BerriAI/litellm model_prices_and_context_window.json @<commit>" -read 2026-11-26
//
// It writes pricing/builtin.json, pricing/builtin_source.go (the constants
// that cite the reference) and pricing/testdata/litellm_builtin.json (the
// reference entries read, kept so a test can check the table against them).
// Run without -from it regenerates from that kept copy (go generate
// ./pricing does so), which must change nothing.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/pricing/builtingen"
)

func main() {
	dir := flag.String("dir", "pricing", "the pricing package's directory")
	from := flag.String("from", "", "LiteLLM's model_prices_and_context_window.json, whole or the kept subset (default: <dir>/testdata/litellm_builtin.json)")
	ref := flag.String("reference", pricing.BuiltinReference, "the reference read, named with its commit")
	read := flag.String("read", pricing.BuiltinReadOn, "the date it was read (YYYY-MM-DD)")
	flag.Parse()
	if err := run(*dir, *from, builtingen.Source{Reference: *ref, ReadOn: *read}); err != nil {
		fmt.Fprintln(os.Stderr, "genbuiltin:", err)
		os.Exit(1)
	}
}

func run(dir, from string, src builtingen.Source) error {
	if from == "" {
		from = filepath.Join(dir, "testdata", "litellm_builtin.json")
	}
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	out, err := builtingen.Generate(data, src)
	if err != nil {
		return err
	}
	for name, b := range map[string][]byte{
		"builtin.json":      out.Table,
		"builtin_source.go": out.SourceGo,
		filepath.Join("testdata", "litellm_builtin.json"): out.Subset,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
