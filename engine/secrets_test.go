package engine_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 23 #10: a secret in the task's goal or in a model's name (a key
// pasted into a goal, a model given as a URL with its key) never reaches
// the database: the task record, the calls and the ledger hold it masked.
func TestSecretsInTheGoalAndTheModelNameAreNotStored(t *testing.T) {
	const key = "sk-ant-api03-Zq7Xw2Lm9Pv4Rt8Ny3Hb6Kc1Jd5Fg0Ts2Qe7Wr4Yu9Io"
	f := newFixture(t, "steps:\n  - usage: {inputTokens: 100, outputTokens: 10, costUsd: 0.01}\n    files: {src/fixed: \"yes\"}\n")
	f.task.Goal = "Fix the parser; the staging key is " + key + " if you need it."
	f.task.Backend.Models = map[string]string{"standard": "sim-large?api_key=" + key, "cheap": "sim-small"}
	must(t, f.run())
	if rec := f.state(); strings.Contains(rec.Goal, key[20:]) || !strings.Contains(rec.Goal, "Fix the parser") {
		t.Errorf("stored goal %q", rec.Goal)
	}
	f.store.Close()
	for _, name := range []string{"purser.db", "purser.db-wal"} {
		data, err := os.ReadFile(filepath.Join(f.dir, name))
		if err != nil {
			continue
		}
		if strings.Contains(string(data), key[20:]) {
			t.Errorf("%s holds the key", name)
		}
	}
}
