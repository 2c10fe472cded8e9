package redact

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// CutMark replaces what Tail drops at its cut.
const CutMark = "…"

// Tail is the last n bytes of s, secrets masked, for a buffer that keeps
// only the end of an output (an agent's stderr). s is redacted whole before
// it is cut, so a secret straddling the cut is masked whole; and the word
// the cut falls inside is dropped, as is s's first word when cutBefore says
// s is itself the end of a longer text: the part of a secret whose start
// was cut off matches no rule (its "sk-" or "AKIA" prefix is gone), and
// would otherwise be kept (issue 23 #10: 46 of a key's 61 characters).
func Tail(s string, n int, cutBefore bool) string {
	s = String(s)
	if len(s) > n {
		s, cutBefore = s[len(s)-n:], true
		for len(s) > 0 && !utf8.RuneStart(s[0]) {
			s = s[1:]
		}
	}
	if !cutBefore {
		return s
	}
	// Drop the word the cut fell inside: up to the first space.
	i := strings.IndexFunc(s, unicode.IsSpace)
	if i < 0 {
		return CutMark
	}
	if i == 0 {
		return s
	}
	return CutMark + s[i:]
}
