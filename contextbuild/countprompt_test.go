package contextbuild_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/contextbuild"
	"github.com/purser-dev/purser/prompt"
)

// pieces are the texts prompts are made of here, with the edges a
// tokenizer's pre-split could join across a line's end: trailing spaces,
// CRLF, punctuation before a newline, '/' and '#' at a line's start,
// digits, non-ASCII letters and spaces, markdown headings inside a body.
var pieces = []string{
	"Make the parser accept trailing commas.", "see src/parser.go", "\n", "\r\n", "  \n", "\t", " ",
	"## ", "\n## Inner heading\n", "#", "/", "//", "./x", ".\n", ".\n/", "!!\n\n", "1234", "42\n",
	"é", "Straße", "日本語", "\u00a0", "\u2028", "'s", "'LL", "FAIL: exit 1", "```go\nfunc F() {}\n```",
	"iteration 7", "  indented", "\n\n\n", "a\u0301", "<|endoftext|>",
}

func randomText(r *rand.Rand, n int) string {
	var b strings.Builder
	for range r.IntN(n) {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

// A prompt counted by section has the count the tokenizer gives it whole.
func TestCountPromptIsTheCounters(t *testing.T) {
	b, err := contextbuild.New()
	if err != nil {
		t.Fatal(err)
	}
	whole, err := contextbuild.DefaultCounter()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(24, 5))
	for i := range 400 {
		var sections []contextbuild.Section
		for range r.IntN(6) {
			sections = append(sections, contextbuild.Section{Title: randomText(r, 3), Body: randomText(r, 40)})
		}
		text := prompt.Build(prompt.Input{Kind: purser.CallMain, Iteration: i, Context: contextbuild.Context{Sections: sections},
			RepairOnly: i%3 == 0, Validators: []purser.Validator{{Name: "tests", Run: "go test ./..."}}})
		if got, want := b.CountPrompt(text), whole.Count(text); got != want {
			t.Fatalf("CountPrompt = %d, the tokenizer counts %d, for %q", got, want, text)
		}
	}
	// Invalid UTF-8 is counted as the Counter counts it, whole.
	bad := "## a\n\xff\xfe\n## b\n"
	if got, want := b.CountPrompt(bad), whole.Count(bad); got != want {
		t.Errorf("invalid UTF-8: CountPrompt = %d, want %d", got, want)
	}
}

func FuzzCountPrompt(f *testing.F) {
	for _, s := range []string{"", "a\n## b\n", "x.\n## /y", "\n## \n## \n", "é\r\n## \u00a0z"} {
		f.Add(s)
	}
	b, err := contextbuild.New()
	if err != nil {
		f.Fatal(err)
	}
	whole, err := contextbuild.DefaultCounter()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := b.CountPrompt(s), whole.Count(s); got != want {
			t.Fatalf("CountPrompt(%q) = %d, the tokenizer counts %d", s, got, want)
		}
	})
}
