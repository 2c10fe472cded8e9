package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purser-dev/purser/backend"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/pricing"
)

// purser.yaml's prices: a cache price of 0 is free, a cache price left out is
// the input price, and a model without input and output is refused.
func TestProjectPricesTellZeroFromAbsent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, config.ProjectFileName)
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("prices:\n  free-cache: {input: 2, output: 8, cacheRead: 0, cacheWrite1h: 4}\n  plain: {input: 2, output: 8}\n")
	p, err := config.LoadProject(path)
	if err != nil {
		t.Fatal(err)
	}
	free, ok := p.Prices.Lookup("free-cache")
	if !ok || free.Price.CacheRead != 0 || free.Price.CacheWrite != free.Price.Input || free.Price.CacheWrite1h != 4_000_000 {
		t.Fatalf("free-cache = %+v", free.Price)
	}
	if !strings.Contains(free.Source, "sha256:") {
		t.Fatalf("source %q lacks the file's SHA-256", free.Source)
	}
	plain, _ := p.Prices.Lookup("plain")
	if plain.Price.CacheRead != plain.Price.Input || plain.Price.Input != 2_000_000 {
		t.Fatalf("plain = %+v", plain.Price)
	}
	write("prices:\n  m: {cacheRead: 1}\n")
	if _, err := config.LoadProject(path); err == nil || !strings.Contains(err.Error(), "prices.m") {
		t.Fatalf("a price without input and output: %v", err)
	}
}

// An event line may say its service tier and its 1-hour cache writes, and is
// priced at those rates.
func TestEventLinesCarryServiceTierAndOneHourWrites(t *testing.T) {
	prices := pricing.Builtin()
	ev, err := backend.ParseEventLine([]byte(`{"model": "gpt-5.5", "inputTokens": 10000, "outputTokens": 1000, "serviceTier": "priority"}`), prices)
	if err != nil || ev.USD != 160_000_000 || ev.CostSource != budget.CostEstimated {
		t.Fatalf("priority event %s (%s), %v; want $0.16", ev.USD, ev.CostSource, err)
	}
	ev, err = backend.ParseEventLine([]byte(`{"model": "claude-sonnet-4-5", "inputTokens": 1000, "cacheWriteTokens": 1000, "cacheWrite1hTokens": 1000}`), prices)
	if err != nil || ev.USD != 6_000_000 {
		t.Fatalf("1-hour write %s, %v; want $0.006", ev.USD, err)
	}
	if _, err := backend.ParseEventLine([]byte(`{"inputTokens": 10, "cacheWriteTokens": 1, "cacheWrite1hTokens": 2}`), prices); err == nil {
		t.Fatal("more 1-hour writes than writes accepted")
	}
}
