package redact

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Display is s made safe to print on a user's terminal or to write into a
// Markdown file a user will cat (STATUS.md, BUDGET.md): secrets masked, as
// String does, every control character removed but newline and tab, and
// bytes that are not UTF-8 replaced by U+FFFD. An agent's output (or a
// repository's file names) could otherwise carry escape sequences that move
// the cursor, clear the screen, write the clipboard (OSC 52), retitle the
// window or hide a line of Purser's own output; a lone 0x9b byte is a CSI to
// a terminal in 8-bit mode. It is the one function for text from an agent on
// its way to a terminal or a file: the live view, alerts, the CLI's messages
// and the reports all use it.
func Display(s string) string {
	s = String(s)
	clean := func(r rune) bool {
		return r != '\n' && r != '\t' && (unicode.IsControl(r) || r == '\u009b')
	}
	if strings.IndexFunc(s, clean) < 0 && utf8.ValidString(s) {
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
		case r == utf8.RuneError && size == 1: // not UTF-8: never a raw byte
			b.WriteRune(utf8.RuneError)
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
