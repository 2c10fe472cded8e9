package redact

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Display is s made safe to print on a user's terminal: secrets masked, as
// String does, and every control character removed but newline and tab. An
// agent's output (or a repository's file names) could otherwise carry escape
// sequences that move the cursor, rewrite the screen, retitle the window or
// hide a line of Purser's own output.
func Display(s string) string {
	s = String(s)
	clean := func(r rune) bool {
		return r != '\n' && r != '\t' && (unicode.IsControl(r) || r == '\u009b')
	}
	if strings.IndexFunc(s, clean) < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == 0x1b: // ESC: drop the whole sequence it starts
			i += size + escapeLength(s[i+size:])
			continue
		case clean(r):
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// escapeLength is how many bytes after an ESC belong to its sequence: a CSI
// (ESC [ … final byte), an OSC or string command (ESC ] … BEL or ESC \), or
// one following byte.
func escapeLength(s string) int {
	if s == "" {
		return 0
	}
	switch s[0] {
	case '[':
		for i := 1; i < len(s); i++ {
			if s[i] >= 0x40 && s[i] <= 0x7e {
				return i + 1
			}
		}
		return len(s)
	case ']', 'P', '^', '_', 'X':
		for i := 1; i < len(s); i++ {
			if s[i] == 0x07 {
				return i + 1
			}
			if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\' {
				return i + 2
			}
		}
		return len(s)
	}
	return 1
}
