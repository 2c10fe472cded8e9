//go:build linux

package sandbox

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
)

// BenchmarkBoxStart is the cost of running `true` in a box, start to exit,
// with the test binary as the box's init; compare BenchmarkDirectStart
// (docs/sandbox.md has the figures).
func BenchmarkBoxStart(b *testing.B) {
	benchmarkBox(b, newWorld(b).box)
}

// BenchmarkBoxStartSmallInit is BenchmarkBoxStart with an init binary that
// does nothing else (testdata/smallinit): the least a box costs.
func BenchmarkBoxStartSmallInit(b *testing.B) {
	box := newWorld(b).box
	box.Init = filepath.Join(b.TempDir(), "smallinit")
	if out, err := exec.Command("go", "build", "-o", box.Init, "./testdata/smallinit").CombinedOutput(); err != nil {
		b.Skipf("cannot build the small init: %v\n%s", err, out)
	}
	benchmarkBox(b, box)
}

func benchmarkBox(b *testing.B, box Box) {
	for b.Loop() {
		cmd, err := box.Command(context.Background(), "true")
		if err != nil {
			b.Fatal(err)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
	}
}

// BenchmarkDirectStart is the cost of running `true` directly.
func BenchmarkDirectStart(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}
