// Package contextbuild builds the context an agent is given for a call —
// goal, issue, the files the issue names, the failing validators' output, the
// plan, earlier iterations and a listing of the workspace — and shrinks it
// by a named strategy when the budget is in WARNING. Tokens are counted with
// a real tokenizer.
package contextbuild

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	gitignore "github.com/sabhiram/go-gitignore"
	"github.com/tiktoken-go/tokenizer"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/workspace"
)

// MaxFileBytes is the most of one file put into a context.
const MaxFileBytes = 256 << 10

// MaxListing is the most workspace paths listed.
const MaxListing = 500

// Input is what a context is built from.
type Input struct {
	Goal      string
	Issue     string
	Workspace string
	Failing   []purser.ValidatorResult // failing validators of the last iteration
	Plan      string
	History   []string // one line per earlier iteration, the latest last
	// HistoryOmitted is how many earlier iterations History no longer
	// holds (the engine keeps the last HistoryWindow).
	HistoryOmitted int
	Feedback       string // problems with the agent's last answer
	// Guard says which files besides those Purser's by name the workspace
	// listing leaves out (nil: those by name only).
	Guard *workspace.Guard
}

// HistoryWindow is how many earlier iterations a prompt describes one line
// each; older ones are summed up in one line. A task's thousandth iteration
// then costs what its tenth does, in tokens (money) and in CPU.
const HistoryWindow = 8

// Section is one part of a context.
type Section struct {
	Name   string // goal, issue, file, failing, plan, history, listing
	Title  string
	Body   string
	Tokens int
}

// Context is a built context.
type Context struct {
	Sections []Section
	Tokens   int
	Strategy string   // "full", or the shrink strategy applied
	Dropped  []string // what a shrink left out, for the record
}

// Counter counts tokens.
type Counter interface{ Count(string) int }

type tiktoken struct{ codec tokenizer.Codec }

func (t tiktoken) Count(s string) int {
	n, err := t.codec.Count(s)
	if err != nil {
		return len(s) / 3 // invalid UTF-8: a conservative guess
	}
	return n
}

var defaultCounter = sync.OnceValues(func() (Counter, error) {
	c, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer: %w", err)
	}
	return tiktoken{c}, nil
})

// DefaultCounter is OpenAI's o200k_base tokenizer. No tokenizer for Claude
// runs offline; o200k counts are close enough to shrink a context by.
func DefaultCounter() (Counter, error) { return defaultCounter() }

// Builder builds contexts. It is safe for concurrent use. Its Counter is
// set before first use and not changed after: the counts it made are kept.
type Builder struct {
	Counter Counter

	// A task's contexts repeat most of their text from one call to the
	// next (the goal, the issue, the files it names, a validator's output,
	// the listing), and tokenizing is most of building one: counts are
	// kept by text, up to maxMemoBytes of it.
	// The memo is two generations: when the current one is full it
	// becomes the previous one, whose entries a lookup still finds and
	// brings back, so that contexts a little larger than the memo — or
	// several tasks' at once — do not empty it on every call.
	mu        sync.Mutex
	memo      map[string]int
	prev      map[string]int
	memoBytes int
}

// maxMemoBytes bounds the text whose token counts a Builder keeps: four
// files at MaxFileBytes, with room for the rest of a task's context.
const maxMemoBytes = 4*MaxFileBytes + 1<<20

// memoEntryBytes is what the memo is charged for an entry besides its
// text: a file's lines are kept one entry each.
const memoEntryBytes = 64

// count is b.Counter.Count(s), counted once per text while it stays in the
// memo, and a new text line by line (countLines).
func (b *Builder) count(s string) int {
	if n, ok := b.lookup(s); ok {
		return n
	}
	n := b.countLines(s)
	if len(s) <= maxWholeText {
		b.keep(s, n) // a larger text's lines are kept: one copy, not two
	}
	return n
}

// maxWholeText is the longest text count keeps whole, beside its lines.
const maxWholeText = 64 << 10

// CountPrompt is b.Counter.Count(s) for a prompt built from this Builder's
// contexts (prompt.Build), counted line by line (countLines): the lines
// the last prompt had are not tokenized again, and the prompt itself,
// new each call, is not kept.
func (b *Builder) CountPrompt(s string) int { return b.countLines(s) }

// splitsAtLines reports whether the Builder's Counter counts a text as the
// sum of its lines (countLines): this package's o200k tokenizer does;
// another Counter (r50k's rules, bytes/4) may not, and counts texts whole.
func (b *Builder) splitsAtLines() bool {
	_, ok := b.Counter.(lineAdditive)
	return ok
}

// lineAdditive is a Counter whose count of a text is the sum of its lines'
// as countLines cuts them.
type lineAdditive interface{ lineAdditive() }

func (tiktoken) lineAdditive() {}

// countLines is b.Counter.Count(s), counted as the sum of its lines', each
// counted once while it stays in the memo. It is exact for a Counter that
// never makes one token of a line's end and what follows it when that is
// a printable ASCII character other than '/': o200k (DefaultCounter) ends
// a piece at a newline unless whitespace or '/' follows, so the lines are
// cut only there (TestCountPromptIsTheCounters, FuzzCountPrompt). Invalid
// UTF-8 is counted whole, as the Counter counts it.
func (b *Builder) countLines(s string) int {
	if !b.splitsAtLines() {
		if n, ok := b.lookup(s); ok {
			return n
		}
		n := b.Counter.Count(s)
		b.keep(s, n)
		return n
	}
	if !utf8.ValidString(s) {
		return b.Counter.Count(s)
	}
	n := 0
	for len(s) > 0 {
		line := s[:lineEnd(s)]
		s = s[len(line):]
		m, ok := b.lookup(line)
		if !ok {
			m = b.Counter.Count(line)
			b.keep(line, m)
		}
		n += m
	}
	return n
}

// lineEnd is the length of s's first line: up to and including the first
// newline that a printable ASCII character other than '/' follows (no
// o200k piece spans it), or all of s.
func lineEnd(s string) int {
	for i := 0; ; {
		j := strings.IndexByte(s[i:], '\n')
		if j < 0 {
			return len(s)
		}
		i += j + 1
		if i < len(s) && s[i] > ' ' && s[i] < 0x7f && s[i] != '/' {
			return i
		}
	}
}

// lookup is the memo's count of s, from the current generation or the
// previous one (which brings it back into the current).
func (b *Builder) lookup(s string) (int, bool) {
	b.mu.Lock()
	n, ok := b.memo[s]
	b.mu.Unlock()
	if ok {
		return n, true
	}
	b.mu.Lock()
	n, ok = b.prev[s]
	b.mu.Unlock()
	if ok {
		b.keep(s, n)
	}
	return n, ok
}

// keep puts s's count in the memo's current generation; a full one
// becomes the previous, and the one before that is dropped.
func (b *Builder) keep(s string, n int) {
	if len(s) > maxMemoBytes/4 {
		return // one text would crowd out the rest
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.memo[s]; ok {
		return
	}
	if b.memo == nil || b.memoBytes+len(s)+memoEntryBytes > maxMemoBytes {
		b.prev, b.memo, b.memoBytes = b.memo, map[string]int{}, 0
	}
	// A copy: s may be part of a longer text (a prompt, a file), which a
	// key would keep alive whole.
	b.memo[strings.Clone(s)] = n
	b.memoBytes += len(s) + memoEntryBytes
}

// New returns a Builder with the default tokenizer.
func New() (*Builder, error) {
	c, err := DefaultCounter()
	if err != nil {
		return nil, err
	}
	return &Builder{Counter: c}, nil
}

func (b *Builder) section(name, title, body string) Section {
	return Section{Name: name, Title: title, Body: body, Tokens: b.count(title) + b.count(body)}
}

func finish(ctx Context) Context {
	ctx.Tokens = 0
	for _, s := range ctx.Sections {
		ctx.Tokens += s.Tokens
	}
	return ctx
}

// historyText is the last HistoryWindow lines of the history, after one line
// saying how many earlier iterations are left out.
func historyText(in Input) string {
	lines, omitted := in.History, in.HistoryOmitted
	if extra := len(lines) - HistoryWindow; extra > 0 {
		lines, omitted = lines[extra:], omitted+extra
	}
	if len(lines) == 0 {
		return ""
	}
	text := strings.Join(lines, "\n")
	if omitted > 0 {
		text = fmt.Sprintf("(%d earlier iteration(s) not shown: none of them passed every validator.)\n", omitted) + text
	}
	return text
}

// Full builds the whole context, as in OPTIMAL.
func (b *Builder) Full(in Input) Context {
	ctx := Context{Strategy: "full"}
	ctx.Sections = append(ctx.Sections, b.section("goal", "Goal", in.Goal))
	if strings.TrimSpace(in.Issue) != "" {
		ctx.Sections = append(ctx.Sections, b.section("issue", "Issue", in.Issue))
	}
	ctx.Sections = append(ctx.Sections, b.fileSections(in.Workspace, in.Issue)...)
	ctx.Sections = append(ctx.Sections, b.failingSections(in.Failing)...)
	if strings.TrimSpace(in.Feedback) != "" {
		ctx.Sections = append(ctx.Sections, b.section("feedback", "Problems with your last answer", in.Feedback))
	}
	if strings.TrimSpace(in.Plan) != "" {
		ctx.Sections = append(ctx.Sections, b.section("plan", "Plan", in.Plan))
	}
	if h := historyText(in); h != "" {
		ctx.Sections = append(ctx.Sections, b.section("history", "Earlier iterations", h))
	}
	if listing := Listing(in.Workspace, in.Guard); listing != "" {
		ctx.Sections = append(ctx.Sections, b.section("listing", "Workspace files", listing))
	}
	return finish(ctx)
}

func (b *Builder) fileSections(dir, issue string) []Section {
	var out []Section
	for _, f := range referenced(dir, issue) {
		data, err := readAtMost(f.real, MaxFileBytes)
		if err != nil {
			continue
		}
		out = append(out, b.section("file", "File "+f.rel, data))
	}
	return out
}

func readAtMost(path string, n int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	// Read what the file holds, not n bytes' worth each time: the files an
	// issue names are read for every call of the task.
	buf, _ := io.ReadAll(io.LimitReader(f, n+1))
	if int64(len(buf)) > n {
		return string(buf[:n]) + "\n[… file cut at " + fmt.Sprint(n) + " bytes …]", nil
	}
	return string(buf), nil
}

func (b *Builder) failingSections(failing []purser.ValidatorResult) []Section {
	var out []Section
	for _, v := range failing {
		if v.Passed {
			continue
		}
		title := fmt.Sprintf("Failing validator %s (exit %d)", v.Name, v.ExitCode)
		if v.TimedOut {
			title = fmt.Sprintf("Failing validator %s (timed out)", v.Name)
		}
		out = append(out, b.section("failing", title, v.Output))
	}
	return out
}

// Listing lists the files of the workspace dir, honouring its root
// .gitignore, one path per line, at most MaxListing. Purser's own files (by
// name, or protected by guard, which may be nil) are left out.
func Listing(dir string, guard *workspace.Guard) string {
	ign := ignoreOf(dir)
	// WalkDir follows no symlink below its root, so root joined with a
	// walked path is that entry's real path.
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return ""
	}
	var paths []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		match := rel
		if d.IsDir() {
			match += "/"
		}
		if d.Name() == ".git" || ign.matches(match) || guard.Hides(root, rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.IsDir() {
			paths = append(paths, rel)
		}
		if len(paths) >= MaxListing {
			return filepath.SkipAll
		}
		return nil
	})
	sort.Strings(paths)
	return strings.Join(paths, "\n")
}

// compileIgnore compiles .gitignore lines (a variable for the tests).
var compileIgnore = gitignore.CompileIgnoreLines

// ignores are the compiled .gitignore files listings met, by content: a
// task's workspace is listed for every call, and compiling its
// .gitignore (a regexp a line) cost as much as walking it. At most
// maxIgnores are kept.
var ignores struct {
	sync.Mutex
	byText map[string]*ignoreSet
}

const maxIgnores = 16

// ignoreSet is a compiled .gitignore and what it said of each path it was
// asked about: a listing asks of every path again on every call, and
// matching a path runs each line's regexp (two thirds of a listing's CPU
// in a repository of 800 files). A GitIgnore does not change, so its
// answer for a path does not either. At most maxIgnoreAnswers are kept: a
// listing visits MaxListing files, their directories and what is ignored
// beside them.
type ignoreSet struct {
	ign *gitignore.GitIgnore

	mu      sync.Mutex
	answers map[string]bool
}

const maxIgnoreAnswers = 1 << 13

// matches is ign.MatchesPath(path).
func (s *ignoreSet) matches(path string) bool {
	s.mu.Lock()
	m, ok := s.answers[path]
	s.mu.Unlock()
	if ok {
		return m
	}
	m = s.ign.MatchesPath(path)
	s.mu.Lock()
	if s.answers == nil || len(s.answers) >= maxIgnoreAnswers {
		s.answers = map[string]bool{}
	}
	s.answers[path] = m
	s.mu.Unlock()
	return m
}

// ignoreOf is the root .gitignore of dir, with .git/, compiled: as
// gitignore.CompileIgnoreFileAndLines compiles it, or .git/ alone when
// there is no file to read.
func ignoreOf(dir string) *ignoreSet {
	text := ""
	if data, err := os.ReadFile(filepath.Join(dir, ".gitignore")); err == nil {
		text = string(data) + "\n"
	}
	ignores.Lock()
	defer ignores.Unlock()
	if set, ok := ignores.byText[text]; ok {
		return set
	}
	lines := []string{".git/"}
	if text != "" {
		lines = strings.Split(text, "\n") // the file's lines, then .git/ in the last's place
		lines[len(lines)-1] = ".git/"
	}
	set := &ignoreSet{ign: compileIgnore(lines...)}
	if ignores.byText == nil || len(ignores.byText) >= maxIgnores {
		ignores.byText = map[string]*ignoreSet{}
	}
	ignores.byText[text] = set
	return set
}

// Strategy shrinks a context to at most maxTokens.
type Strategy func(b *Builder, in Input, maxTokens int) Context

var strategies = map[string]Strategy{
	"failing_first": FailingFirst,
}

// Strategies returns the names of the shrink strategies.
func Strategies() []string {
	names := make([]string, 0, len(strategies))
	for n := range strategies {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Shrink builds the context with the named strategy.
func (b *Builder) Shrink(in Input, strategy string, maxTokens int) (Context, error) {
	s, ok := strategies[strategy]
	if !ok {
		return Context{}, fmt.Errorf("unknown context strategy %q (known: %s)", strategy, strings.Join(Strategies(), ", "))
	}
	ctx := s(b, in, maxTokens)
	ctx.Strategy = strategy
	return ctx, nil
}

// FailingFirst keeps the goal, the failing validators' output (trimmed from
// the middle to fit) and the files the issue names, and drops the rest.
// The output gets at most half of what is left after the goal when there are
// files to keep too.
func FailingFirst(b *Builder, in Input, maxTokens int) Context {
	full := b.Full(in)
	ctx := Context{}
	var failing, files []Section
	for _, s := range full.Sections {
		switch s.Name {
		case "goal":
			ctx.Sections = append(ctx.Sections, s)
		case "failing", "feedback":
			failing = append(failing, s)
		case "file":
			files = append(files, s)
		default:
			ctx.Dropped = append(ctx.Dropped, s.Title)
		}
	}
	left := maxTokens - finish(ctx).Tokens
	outputShare := left
	if len(files) > 0 {
		outputShare = left / 2
	}
	for i, s := range failing {
		share := outputShare / (len(failing) - i)
		s = b.fit(s, share)
		outputShare -= s.Tokens
		left -= s.Tokens
		ctx.Sections = append(ctx.Sections, s)
	}
	for _, s := range files {
		if s.Tokens > left {
			if left < 64 {
				ctx.Dropped = append(ctx.Dropped, s.Title)
				continue
			}
			s = b.fit(s, left)
		}
		left -= s.Tokens
		ctx.Sections = append(ctx.Sections, s)
	}
	return finish(ctx)
}

// fit trims a section's body from the middle until it has at most max
// tokens.
func (b *Builder) fit(s Section, max int) Section {
	for s.Tokens > max && len(s.Body) > 0 {
		keep := len(s.Body) * max / (s.Tokens + 1) * 9 / 10
		s.Body = TrimMiddle(s.Body, keep)
		s.Tokens = b.count(s.Title) + b.count(s.Body)
		if keep == 0 {
			break
		}
	}
	return s
}

// TrimMiddle keeps the first and last halves of s within n bytes, marking
// the cut.
func TrimMiddle(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "\n[… cut …]\n"
	if n <= len(mark) {
		return ""
	}
	half := (n - len(mark)) / 2
	return strings.ToValidUTF8(s[:half], "") + mark + strings.ToValidUTF8(s[len(s)-half:], "")
}
