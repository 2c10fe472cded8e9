package validate_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/validate"
)

// Issue 15 #11: a secret straddling either cut of a long validator output
// is redacted whole, before the cut, so no part of it is kept.
func TestSecretAcrossTheOutputCutIsRedactedWhole(t *testing.T) {
	const (
		gitlabPAT    = "glpat-xK9mPq2RsT4vWy6zA8bC" // test-only, never issued
		awsAccessKey = "AKIAZ7Q3LMNP4RT2XW6Y"
	)
	half := validate.MaxOutput / 2
	filler := func(n int) string { // n bytes of short lines
		var b strings.Builder
		for b.Len() < n {
			b.WriteString(strings.Repeat("x", min(79, n-b.Len()-1)) + "\n")
		}
		return b.String()[:n]
	}
	// The head cut falls 13 bytes into the token; the tail cut 6 bytes
	// into the key.
	head := filler(half-14) + "\n" + gitlabPAT + "\n"
	tail := awsAccessKey + "\n" + filler(half-len(awsAccessKey[6:])-1)
	out := head + filler(100_000) + "\n" + tail
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "out.txt"), []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	script := "cat out.txt"
	res := validate.Runner{}.RunValidator(context.Background(), ws, purser.Validator{Name: "leaky", Run: script})
	if !strings.Contains(res.Output, "bytes cut from the middle") {
		t.Fatalf("the output was not cut: %d bytes", len(res.Output))
	}
	for _, part := range []string{gitlabPAT[:13], gitlabPAT[6:13], awsAccessKey[6:], awsAccessKey[10:]} {
		if strings.Contains(res.Output, part) {
			t.Errorf("part %q of a secret survived the cut", part)
		}
	}
	if !strings.Contains(res.Output, "[REDACTED]") {
		t.Errorf("no secret was redacted:\n%s", fmt.Sprintf("%.200q…", res.Output))
	}
}
