package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser/config"
)

// Issue 23 #16: a number reached through a YAML merge key (<<) or an alias
// is checked as the field it lands in: 1500.7 tokens are refused, never
// stored as 1500.
func TestBudgetNumbersReachedThroughMergeKeysAndAliasesAreChecked(t *testing.T) {
	for name, doc := range map[string]string{
		"merged from an anchor": "optimal: &o\n  tokens: 1500.7\nwarning:\n  <<: *o\nhard:\n  maxIterations: 3\n",
		"merged over an anchor": "warning: &w\n  usd: 1\nhard:\n  <<: *w\n  maxIterations: 3.5\n",
		"inline merge":          "hard: {<<: {tokens: 1500.7}, maxIterations: 3}\n",
		"aliased scalar":        "optimal: {usd: &n 1.5}\nhard: {tokens: *n, maxIterations: 3}\n",
		"aliased mapping":       "warning: &w {tokens: 1500.7}\nhard: {maxIterations: 3}\noptimal: *w\n",
		"merged into hard":      "optimal: &o {tokens: 1500.7}\nhard:\n  <<: *o\n  maxIterations: 3\n",
		"nested merges":         "optimal: &o {tokens: 1500.7}\nwarning: &w {<<: *o}\nhard:\n  <<: *w\n  maxIterations: 3\n",
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := config.ParseBudget("b.yaml", []byte(doc))
			if err == nil || !strings.Contains(err.Error(), "want a whole number") {
				t.Fatalf("accepted (err %v): optimal %+v warning %+v hard %+v", err, cfg.Optimal, cfg.Warning, cfg.Hard)
			}
		})
	}
	// Whole numbers and dollars merged, or anchored, are read as themselves.
	cfg, err := config.ParseBudget("b.yaml", []byte("optimal: &o {tokens: 1000, usd: &d 0.5}\nwarning: {usd: *d}\nhard:\n  <<: *o\n  maxIterations: 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Hard.Tokens == nil || *cfg.Hard.Tokens != 1000 || cfg.Warning.USD == nil {
		t.Fatalf("hard %+v warning %+v", cfg.Hard, cfg.Warning)
	}
}

// The same in a task file, whose budget sits under budget:.
func TestTaskBudgetNumbersReachedThroughMergeKeysAreChecked(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, config.ProjectFileName), []byte("backends:\n  mine: {type: agent}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	head := "id: t\ngoal: g\nworkspace: ./ws\nvalidators: [{name: v, run: 'true'}]\nbackend: mine\n"
	for name, budget := range map[string]string{
		"merge":          "budget:\n  optimal: &o\n    tokens: 1500.7\n  hard:\n    <<: *o\n    maxIterations: 3\n",
		"inline merge":   "budget:\n  hard: {<<: {tokens: 1500.7}, maxIterations: 3}\n",
		"aliased number": "budget:\n  optimal: {usd: &n 0.5}\n  hard: {maxIterations: *n}\n",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, "task.yaml")
			if err := os.WriteFile(path, []byte(head+budget), 0o644); err != nil {
				t.Fatal(err)
			}
			got, _, err := config.Loader{Backends: fakeTypes()}.LoadTask(path)
			if err == nil || !strings.Contains(err.Error(), "want a whole number") {
				t.Fatalf("accepted (err %v): %+v", err, got.Budget)
			}
		})
	}
}

// Merges of merges double at each level: checking them stops at a bound
// and says so, rather than walking 2^40 mappings.
func TestBudgetMergeBombIsRefusedQuickly(t *testing.T) {
	var b strings.Builder
	b.WriteString("optimal: &l0 {tokens: 1}\nwarning:\n")
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&b, "  k%d: &l%d {<<: [*l%d, *l%d]}\n", i, i, i-1, i-1)
	}
	b.WriteString("hard:\n  <<: *l40\n  maxIterations: 3\n")
	done := make(chan error, 1)
	go func() { _, err := config.ParseBudget("b.yaml", []byte(b.String())); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "too many aliases and merge keys") {
			t.Fatalf("err %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("still checking after 20s")
	}
}
