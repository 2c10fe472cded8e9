package contextbuild_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/contextbuild"
	"github.com/purser-dev/purser/workspace/workspacetest"
)

func TestReferencedFiles(t *testing.T) {
	ws := workspacetest.Tree(t)
	issue := "Parsing fails; see src/parser.go and README.md. Not ../outside/secret.txt, /etc/passwd, link-out.txt or missing.go."
	got := contextbuild.ReferencedFiles(ws, issue)
	if strings.Join(got, ",") != "src/parser.go,README.md" {
		t.Fatalf("ReferencedFiles = %v", got)
	}
}

func TestListingHonoursGitignore(t *testing.T) {
	ws := workspacetest.Tree(t)
	l := contextbuild.Listing(ws, nil)
	for _, want := range []string{"src/parser.go", "README.md", ".gitignore"} {
		if !strings.Contains(l, want) {
			t.Errorf("listing lacks %s:\n%s", want, l)
		}
	}
	for _, ignored := range []string{"build/out.bin", "debug.log"} {
		if strings.Contains(l, ignored) {
			t.Errorf("listing has ignored %s", ignored)
		}
	}
}

func TestFailingFirstShrink(t *testing.T) {
	ws := workspacetest.Tree(t)
	b, err := contextbuild.New()
	if err != nil {
		t.Fatal(err)
	}
	long := "START of output\n" + strings.Repeat("line of noisy test output\n", 5000) + "FAIL: the real failure at the end\n"
	in := contextbuild.Input{Goal: "Fix the parser.", Issue: "See src/parser.go.", Workspace: ws, Plan: "1. do it",
		History: []string{"Iteration 1: 0 of 1 passed."},
		Failing: []purser.ValidatorResult{{Name: "tests", ExitCode: 1, Output: long}}}
	full := b.Full(in)
	ctx, err := b.Shrink(in, "failing_first", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Tokens > 1000 || ctx.Tokens >= full.Tokens {
		t.Fatalf("shrunk to %d tokens (full %d), cap 1000", ctx.Tokens, full.Tokens)
	}
	var text strings.Builder
	for _, s := range ctx.Sections {
		text.WriteString(s.Title + "\n" + s.Body + "\n")
	}
	for _, keep := range []string{"Fix the parser.", "START of output", "FAIL: the real failure at the end", "File src/parser.go", "[… cut …]"} {
		if !strings.Contains(text.String(), keep) {
			t.Errorf("shrunk context lost %q", keep)
		}
	}
	if len(ctx.Dropped) != 4 { // issue, plan, history, listing
		t.Errorf("dropped %v", ctx.Dropped)
	}
	if _, err := b.Shrink(in, "no-such", 10); err == nil || !strings.Contains(err.Error(), "failing_first") {
		t.Errorf("unknown strategy: %v", err)
	}
}

func TestTrimMiddleKeepsValidUTF8(t *testing.T) {
	s := strings.Repeat("é", 100)
	got := contextbuild.TrimMiddle(s, 51)
	if !strings.Contains(got, "[… cut …]") || strings.ContainsRune(got, '\uFFFD') || len(got) > 51 {
		t.Fatalf("TrimMiddle = %q (%d bytes)", got, len(got))
	}
}

func historyOf(n int) []string {
	h := make([]string, n)
	for i := range h {
		h[i] = fmt.Sprintf("Iteration %d: 0 of 1 validators passed.", i+1)
	}
	return h
}

// Issue 10 #9: the prompt's history is bounded, so a task's thousandth
// iteration costs what its tenth does, in tokens (money) and CPU.
func TestHistoryInThePromptIsBounded(t *testing.T) {
	b, err := contextbuild.New()
	if err != nil {
		t.Fatal(err)
	}
	tokens := map[int]int{}
	for _, n := range []int{contextbuild.HistoryWindow, 100, 1000} {
		ctx := b.Full(contextbuild.Input{Goal: "g", History: historyOf(n)})
		var hist string
		for _, s := range ctx.Sections {
			if s.Name == "history" {
				hist = s.Body
				tokens[n] = s.Tokens
			}
		}
		if !strings.Contains(hist, fmt.Sprintf("Iteration %d:", n)) {
			t.Errorf("%d iterations: the latest is not in the history:\n%s", n, hist)
		}
		if n > contextbuild.HistoryWindow {
			if strings.Contains(hist, fmt.Sprintf("Iteration %d:", n-contextbuild.HistoryWindow)) {
				t.Errorf("%d iterations: an iteration outside the window is shown:\n%s", n, hist)
			}
			if !strings.Contains(hist, fmt.Sprintf("(%d earlier iteration(s) not shown", n-contextbuild.HistoryWindow)) {
				t.Errorf("%d iterations: the left-out count is not said:\n%s", n, hist)
			}
		}
	}
	if tokens[1000] > tokens[100]+4 {
		t.Errorf("history tokens grow with the task: %d at 100 iterations, %d at 1000", tokens[100], tokens[1000])
	}
	// What the engine passes (the window and a count) reads the same.
	windowed := b.Full(contextbuild.Input{Goal: "g", History: historyOf(1000)[1000-contextbuild.HistoryWindow:], HistoryOmitted: 1000 - contextbuild.HistoryWindow})
	full := b.Full(contextbuild.Input{Goal: "g", History: historyOf(1000)})
	if windowed.Tokens != full.Tokens {
		t.Errorf("windowed history %d tokens, full history %d", windowed.Tokens, full.Tokens)
	}
}

// BenchmarkFullContextByHistory builds a full context after 10, 100 and
// 1,000 iterations: flat, since only the window is tokenized.
func BenchmarkFullContextByHistory(b *testing.B) {
	builder, err := contextbuild.New()
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{10, 100, 1000} {
		h := historyOf(n)
		b.Run(fmt.Sprintf("iterations=%d", n), func(b *testing.B) {
			for b.Loop() {
				builder.Full(contextbuild.Input{Goal: "g", History: h})
			}
		})
	}
}
