package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/purser-dev/purser/sandbox"
)

// BenchmarkSimTask100 is one sim task of 100 iterations, each ending with a
// validator (`exit 1`, so that the task runs all 100), unboxed and with the
// project's sandbox: on (every validator in its own box; the sim backend's
// edits are Purser's own, applied outside any box, so it says sandbox: off).
// The ratio on/off is the box's cost on a task (docs/benchmarks.md).
func BenchmarkSimTask100(b *testing.B) {
	for _, mode := range []string{"off", "on"} {
		b.Run("sandbox="+mode, func(b *testing.B) {
			if mode == "on" && sandbox.Available() != nil {
				b.Skip(sandbox.Available())
			}
			bin := buildPurser(b)
			dir := b.TempDir()
			b.Setenv("XDG_STATE_HOME", filepath.Join(dir, ".state"))
			if err := os.Mkdir(filepath.Join(dir, "ws"), 0o755); err != nil {
				b.Fatal(err)
			}
			files := map[string]string{
				"purser.yaml": "sandbox: " + mode + "\nbackends:\n  s: {type: sim, script: sim.yaml, sandbox: off}\n",
				"sim.yaml":    "steps:\n  - usage: {inputTokens: 100, costUsd: 0.001}\n",
			}
			for name, text := range files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
					b.Fatal(err)
				}
			}
			i := 0
			for b.Loop() {
				i++
				id := "t" + strconv.Itoa(i)
				task := "id: " + id + "\ngoal: g\nworkspace: ./ws\nbackend: s\nvalidators: [{name: never, run: 'exit 1'}]\n" +
					"budget: {hard: {usd: 10, maxIterations: 100}}\ndegrade: {actions: []}\n"
				file := filepath.Join(dir, id+".yaml")
				if err := os.WriteFile(file, []byte(task), 0o600); err != nil {
					b.Fatal(err)
				}
				// The real binary, which is its boxes' init as in use.
				cmd := exec.Command(bin, "run", "--json", "--db", filepath.Join(dir, "p.db"), file)
				cmd.Dir = dir
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				err := cmd.Run()
				if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitBudgetStop {
					b.Fatalf("%v, want exit %d (BLOCKED after 100 iterations)\n%s", err, exitBudgetStop, stderr.String())
				}
			}
		})
	}
}
