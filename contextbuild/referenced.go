package contextbuild

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/purser-dev/purser/workspace"
)

// pathLike finds words in an issue that look like file paths: with a
// directory separator or a file extension.
var pathLike = regexp.MustCompile(`[A-Za-z0-9_./\-]+`)

// ReferencedFiles returns the files named in text that exist inside the
// workspace dir, as workspace-relative paths, in order of first mention.
func ReferencedFiles(dir, text string) []string {
	refs := referenced(dir, text)
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.rel
	}
	return out
}

// fileRef is a file named in a text: its workspace-relative path, and the
// real path it resolved to.
type fileRef struct{ rel, real string }

// referenced is ReferencedFiles with each file's real path, so that a
// context reads the file it found without resolving its name again.
func referenced(dir, text string) []fileRef {
	var out []fileRef
	seen := map[string]bool{}
	for _, w := range pathLike.FindAllString(text, -1) {
		w = strings.TrimRight(w, ".,:;")
		if !strings.Contains(w, "/") && !strings.Contains(strings.TrimPrefix(w, "."), ".") {
			continue
		}
		if seen[w] {
			continue
		}
		seen[w] = true
		real, err := workspace.Resolve(dir, w)
		if err != nil {
			continue
		}
		if fi, err := os.Stat(real); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		out = append(out, fileRef{rel: filepath.Clean(w), real: real})
	}
	return out
}
