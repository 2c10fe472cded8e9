package contextbuild

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// ErrOutsideWorkspace is returned for a path that leads out of the workspace.
var ErrOutsideWorkspace = errors.New("path leads outside the workspace")

// Resolve returns the real path of rel inside workspace. It refuses absolute
// paths, paths with "..", NUL bytes, and symlinks that lead out.
func Resolve(workspace, rel string) (string, error) {
	switch {
	case strings.IndexByte(rel, 0) >= 0:
		return "", fmt.Errorf("%q: NUL byte in path: %w", rel, ErrOutsideWorkspace)
	case filepath.IsAbs(rel):
		return "", fmt.Errorf("%q: absolute path: %w", rel, ErrOutsideWorkspace)
	}
	clean := filepath.Clean(rel)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%q: %w", rel, ErrOutsideWorkspace)
	}
	root, err := filepath.EvalSymlinks(workspace)
	if err != nil {
		return "", fmt.Errorf("workspace: %w", err)
	}
	real, err := filepath.EvalSymlinks(filepath.Join(root, clean))
	if err != nil {
		return "", err
	}
	if real != root && !strings.HasPrefix(real, root+string(filepath.Separator)) {
		return "", fmt.Errorf("%q resolves to %s: %w", rel, real, ErrOutsideWorkspace)
	}
	return real, nil
}

// pathLike finds words in an issue that look like file paths: with a
// directory separator or a file extension.
var pathLike = regexp.MustCompile(`[A-Za-z0-9_./\-]+`)

// ReferencedFiles returns the files named in text that exist inside the
// workspace, as workspace-relative paths, in order of first mention.
func ReferencedFiles(workspace, text string) []string {
	var out []string
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
		real, err := Resolve(workspace, w)
		if err != nil {
			continue
		}
		if fi, err := os.Stat(real); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		out = append(out, filepath.Clean(w))
	}
	return out
}
