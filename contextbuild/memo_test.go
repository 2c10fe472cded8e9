package contextbuild

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	gitignore "github.com/sabhiram/go-gitignore"
)

// countingCounter counts words, and how many texts it was asked to count.
type countingCounter struct {
	mu    sync.Mutex
	calls int
}

func (c *countingCounter) Count(s string) int {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	return len(strings.Fields(s))
}

// lineAdditive: words never span a newline.
func (c *countingCounter) lineAdditive() {}

func (c *countingCounter) took() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.calls
	c.calls = 0
	return n
}

// A task's calls build contexts that repeat most of their text: only what
// changed is tokenized again, and the counts are the counter's own.
func TestARepeatedContextIsCountedOnce(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "parser.go"), []byte("package p\n\nfunc Parse() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &countingCounter{}
	b := &Builder{Counter: c}
	in := Input{Goal: "Fix the parser.", Issue: "See parser.go.", Workspace: ws, Plan: "1. fix it", History: []string{"Iteration 1: 0 of 1 validators passed."}}
	first := b.Full(in)
	if c.took() == 0 {
		t.Fatal("the first context counted nothing")
	}
	again := b.Full(in)
	if n := c.took(); n != 0 {
		t.Errorf("the same context again tokenized %d texts, want 0", n)
	}
	if again.Tokens != first.Tokens {
		t.Errorf("the same context again: %d tokens, first %d", again.Tokens, first.Tokens)
	}
	in.History = append(in.History, "Iteration 2: 0 of 1 validators passed.")
	next := b.Full(in)
	// The new line, and the one before it, which now ends in a newline.
	if n := c.took(); n != 2 {
		t.Errorf("a context whose history grew by a line tokenized %d texts, want 2", n)
	}
	plain := (&Builder{Counter: &countingCounter{}}).Full(in)
	if next.Tokens != plain.Tokens {
		t.Errorf("memoized count %d, counted afresh %d", next.Tokens, plain.Tokens)
	}
}

// The memo is bounded: a long task's changing texts do not pile up.
func TestTheCountMemoIsBounded(t *testing.T) {
	b := &Builder{Counter: &countingCounter{}}
	chunk := strings.Repeat("x ", 32<<10)
	for i := range 200 {
		b.count(fmt.Sprint(i, chunk))
		if b.memoBytes > maxMemoBytes {
			t.Fatalf("after %d texts the memo holds %d bytes, bound %d", i+1, b.memoBytes, maxMemoBytes)
		}
	}
	huge := strings.Repeat("y ", maxMemoBytes/4)
	if got := b.count(huge); got != maxMemoBytes/4 {
		t.Errorf("count of a huge text = %d", got)
	}
	if _, kept := b.memo[huge]; kept {
		t.Error("a text over a quarter of the bound was kept")
	}
}

// A file the issue names is read at its size, not MaxFileBytes' worth of
// memory on every call of the task; a longer file is still cut.
func TestAReferencedFileIsReadAtItsSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "small.go")
	if err := os.WriteFile(path, []byte("package small\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const reads = 100
	for range reads {
		if got, err := readAtMost(path, MaxFileBytes); err != nil || got != "package small\n" {
			t.Fatalf("readAtMost = %q, %v", got, err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / reads; per > 16<<10 {
		t.Errorf("reading a 14-byte file allocated %d bytes per read", per)
	}
	got, err := readAtMost(path, 7)
	if err != nil || got != "package\n[… file cut at 7 bytes …]" {
		t.Errorf("readAtMost(7) = %q, %v", got, err)
	}
}

// A workspace's .gitignore is compiled once, not for every listing, and a
// changed one is honoured by the next.
func TestAGitignoreIsCompiledOncePerText(t *testing.T) {
	compiles := 0
	compileIgnore = func(lines ...string) *gitignore.GitIgnore {
		compiles++
		return gitignore.CompileIgnoreLines(lines...)
	}
	t.Cleanup(func() { compileIgnore = gitignore.CompileIgnoreLines })
	ws := t.TempDir()
	for name, body := range map[string]string{".gitignore": "# " + t.Name() + "\n*.log\n", "a.go": "", "b.log": "", "c.tmp": ""} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if got := Listing(ws, nil); got != ".gitignore\na.go\nc.tmp" {
			t.Fatalf("listing:\n%s", got)
		}
	}
	if compiles != 1 {
		t.Errorf("three listings compiled the .gitignore %d times, want 1", compiles)
	}
	if err := os.WriteFile(filepath.Join(ws, ".gitignore"), []byte("# "+t.Name()+"\n*.tmp\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := Listing(ws, nil); got != ".gitignore\na.go\nb.log" {
		t.Errorf("after the .gitignore changed, listing:\n%s", got)
	}
	if compiles != 2 {
		t.Errorf("the changed .gitignore: %d compiles in all, want 2", compiles)
	}
}

// What a .gitignore says of a path is asked once: the next listing reads
// the answer kept (here planted, to tell it from a match run again).
func TestAGitignoresAnswerForAPathIsKept(t *testing.T) {
	ws := t.TempDir()
	for name, body := range map[string]string{".gitignore": "# " + t.Name() + "\n*.log\n", "a.go": "", "b.log": ""} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := Listing(ws, nil); got != ".gitignore\na.go" {
		t.Fatalf("listing:\n%s", got)
	}
	set := ignoreOf(ws)
	set.mu.Lock()
	kept, ok := set.answers["b.log"]
	set.answers["b.log"] = false
	set.mu.Unlock()
	if !ok || !kept {
		t.Fatalf("the answer for b.log: %v (kept %v), want true, kept", kept, ok)
	}
	if got := Listing(ws, nil); got != ".gitignore\na.go\nb.log" {
		t.Errorf("the second listing matched b.log again instead of reading the kept answer:\n%s", got)
	}
}

// bytesCounter counts a text as a quarter of its bytes: not the sum of its
// lines' counts.
type bytesCounter struct{}

func (bytesCounter) Count(s string) int { return len(s) / 4 }

// A Counter that does not count by lines (another tokenizer's rules, a
// bytes/4 estimate) gets each text counted whole: the prompt's count is
// its own, not the sum of its lines'.
func TestCountPromptIsWholeForACounterNotByLines(t *testing.T) {
	b := &Builder{Counter: bytesCounter{}}
	s := "a\nb\nc\nd\n"
	if got, want := b.CountPrompt(s), (bytesCounter{}).Count(s); got != want {
		t.Fatalf("CountPrompt = %d, the counter says %d", got, want)
	}
}

// Contexts a little larger than the memo, used in turn, are not counted
// afresh each time: the memo's previous generation still holds the other.
func TestTheMemoKeepsThePreviousGeneration(t *testing.T) {
	c := &countingCounter{}
	b := &Builder{Counter: c}
	big := func(tag string) string {
		// Each line is charged its bytes and memoEntryBytes: 3/5 of the
		// memo each, so that two do not fit in one generation.
		var sb strings.Builder
		for i, charged := 0, 0; charged < maxMemoBytes*3/5; i++ {
			line := fmt.Sprintf("%s line %d of a large file\n", tag, i)
			sb.WriteString(line)
			charged += len(line) + memoEntryBytes
		}
		return sb.String()
	}
	x, y := big("x"), big("y")
	b.CountPrompt(x)
	b.CountPrompt(y) // the memo is full: x's lines move to the previous generation
	c.took()
	b.CountPrompt(x)
	if n := c.took(); n != 0 {
		t.Fatalf("x again tokenized %d lines, want 0: it was in the previous generation", n)
	}
}
