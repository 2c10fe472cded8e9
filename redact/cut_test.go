package redact_test

import (
	"strings"
	"testing"

	"github.com/purser-dev/purser/redact"
)

// Issue 23 #10: a buffer that keeps the last bytes of an agent's stderr
// cuts a key it straddles; the part after the cut has lost the prefix the
// rules know it by. Tail keeps none of it, wherever the cut falls, and
// keeps the words around it.
func TestTailKeepsNoPartOfASecretAcrossTheCut(t *testing.T) {
	const key = "sk-ant-api03-Zq7Xw2Lm9Pv4Rt8Ny3Hb6Kc1Jd5Fg0Ts2Qe7Wr4Yu9Io3Pa6" // 61 characters, test-only
	if len(key) != 61 {
		t.Fatalf("key is %d characters", len(key))
	}
	before, after := "error: calling with", "refused\nretry later\n"
	text := before + " " + key + " " + after
	for cut := 1; cut < len(before)+len(key)+5; cut++ {
		kept := text[cut:]
		// The buffer already lost the start: cutBefore.
		got := redact.Tail(kept, len(kept), true)
		if leak := longestCommon(got, key); leak >= 8 {
			t.Errorf("cut %d: %d characters of the key kept: %q", cut, leak, got)
		}
		if !strings.Contains(got, "retry later") {
			t.Errorf("cut %d: lost the text after the key: %q", cut, got)
		}
		// Tail cuts it itself, from the whole text.
		got = redact.Tail(text, len(text)-cut, false)
		if leak := longestCommon(got, key); leak >= 8 {
			t.Errorf("Tail(text, %d): %d characters of the key kept: %q", len(text)-cut, leak, got)
		}
	}
	if got := redact.Tail("all fine\n", 100, false); got != "all fine\n" {
		t.Errorf("a short text is changed: %q", got)
	}
}

func longestCommon(s, key string) int {
	best := 0
	for i := range key {
		for j := len(key); j > i+best; j-- {
			if strings.Contains(s, key[i:j]) {
				best = j - i
				break
			}
		}
	}
	return best
}
