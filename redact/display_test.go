package redact_test

import (
	"strings"
	"testing"

	"github.com/purser-dev/purser/redact"
)

// Issue 15 #12: escape sequences in agent output never reach the user's
// terminal through Purser's live view, logs or messages.
func TestDisplayRemovesTerminalControl(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"plain text is kept", "main call ok: 3 files\n\tdone", "main call ok: 3 files\n\tdone"},
		{"colour (CSI)", "\x1b[31mred\x1b[0m", "red"},
		{"cursor up and clear line", "ok\x1b[1A\x1b[2Kfake line", "okfake line"},
		{"window title (OSC with BEL)", "\x1b]0;pwned\x07text", "text"},
		{"hyperlink (OSC with ST)", "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"},
		{"carriage return overwrite", "all good\rBLOCKED", "all goodBLOCKED"},
		{"bell and backspace", "a\x07b\x08c", "abc"},
		{"8-bit CSI", "x\u009b31my", "x31my"},
		{"unicode is kept", "café — ✓", "café — ✓"},
		{"a cut-off sequence at the end", "tail\x1b[", "tail"},
		{"screen clear", "a\x1b[2J\x1b[Hb", "ab"},
		{"clipboard write (OSC 52)", "a\x1b]52;c;Y3VybA==\x07b", "ab"},
		{"a raw 8-bit CSI byte, not UTF-8", "x\x9b31my", "x\ufffd31my"},
	}
	for _, c := range cases {
		if got := redact.Display(c.in); got != c.want {
			t.Errorf("%s: Display(%q) = %q, want %q", c.name, c.in, got, c.want)
		}
	}
	if got := redact.Display("key sk-ant-api03-" + strings.Repeat("a", 40)); strings.Contains(got, "aaaaaaaaaa") {
		t.Errorf("Display kept a secret: %q", got)
	}
}
