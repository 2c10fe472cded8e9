package proctest

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// ImportsOnly fails t for each import, in the non-test Go files of the
// working directory (the package under test), that allowed does not name.
//
// A package that must be initialised before the rest of purser (the
// `--version` shortcut, the supervisor's early init) stays early only while
// it imports early packages: Go initialises packages in the order of their
// import paths, each once its imports are, and an import that sorts late
// (strings, golang.org/x/sys/unix, runtime/debug, …) holds it back behind
// every package of the CLI (issue 24). Nothing breaks then; it is only slow
// again, which is why a test says so. measure is the command that shows
// where the init then runs, for the message.
func ImportsOnly(t *testing.T, allowed []string, measure string) {
	t.Helper()
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
			if !slices.Contains(allowed, path) {
				t.Errorf("%s imports %s: measure where this init then runs (%s) before allowing it here", name, path, measure)
			}
		}
	}
}
