package supervisor_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The supervisor costs about a spawn only while its package is initialised
// before the rest of purser: Go initialises packages in the order of their
// import paths, each once its imports are, and an import that sorts late
// (strings, golang.org/x/sys/unix, runtime/debug, …) would hold it back
// behind every package of the CLI (issue 24). Nothing breaks then; it is
// only slow again, which is why this test says so.
func TestImportsOnlyPackagesInitialisedEarly(t *testing.T) {
	early := map[string]bool{"bytes": true, "fmt": true, "os": true, "os/signal": true, "strconv": true, "sync": true, "syscall": true, "time": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !early[path] {
				t.Errorf("%s imports %s: measure where the supervisor's init then runs (GODEBUG=inittrace=1 purser __purser_supervise 3 -- /bin/true 3</dev/null) before allowing it here", name, path)
			}
		}
	}
}
