// Package workspace keeps an agent's work inside its workspace and off
// Purser's own files: it confines paths (CheckRelative, Resolve, Writable),
// knows which files are Purser's (a Guard, made once per process by the
// wiring), writes without following links (ReplaceFile) and writes STATUS.md
// and BUDGET.md (WriteArtifact). It imports no store, backend or engine.
package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrOutsideWorkspace is returned for a path that leads out of the workspace.
var ErrOutsideWorkspace = errors.New("path leads outside the workspace")

// CheckRelative refuses, without looking at any file, a path that cannot
// name something inside a workspace: a NUL byte, an absolute path, or one
// that climbs out with "..". It returns the cleaned path.
func CheckRelative(rel string) (string, error) {
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
	return clean, nil
}

func within(root, real string) bool {
	return real == root || strings.HasPrefix(real, root+string(filepath.Separator))
}

// Resolve returns the real path of an existing rel inside workspace. It
// refuses what CheckRelative refuses, and symlinks that lead out.
func Resolve(workspace, rel string) (string, error) {
	clean, err := CheckRelative(rel)
	if err != nil {
		return "", err
	}
	root, err := filepath.EvalSymlinks(workspace)
	if err != nil {
		return "", fmt.Errorf("workspace: %w", err)
	}
	real, err := filepath.EvalSymlinks(filepath.Join(root, clean))
	if err != nil {
		return "", err
	}
	if !within(root, real) {
		return "", fmt.Errorf("%q resolves to %s: %w", rel, real, ErrOutsideWorkspace)
	}
	return real, nil
}

// Writable returns where an agent's edit protocol may write (or delete)
// the file rel inside workspace, which need not exist yet. It refuses what
// CheckRelative refuses, the workspace itself, a path whose deepest
// existing directory resolves outside the workspace through a symlink, a
// target that is itself a symlink, and Purser's own files (ErrProtected):
// by name, or given to g. Create missing directories only after it
// returns, and write with ReplaceFile, never into the file: it may be
// hard-linked to one outside the workspace.
func (g *Guard) Writable(workspace, rel string) (string, error) {
	clean, err := CheckRelative(rel)
	if err != nil {
		return "", err
	}
	if clean == "." {
		return "", fmt.Errorf("%q: not a file in the workspace: %w", rel, ErrOutsideWorkspace)
	}
	root, err := filepath.EvalSymlinks(workspace)
	if err != nil {
		return "", fmt.Errorf("workspace: %w", err)
	}
	for dir := filepath.Join(root, filepath.Dir(clean)); ; dir = filepath.Dir(dir) {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			if !within(root, real) {
				return "", fmt.Errorf("%q resolves through a symlink to %s: %w", rel, real, ErrOutsideWorkspace)
			}
			break
		}
		if dir == root {
			break
		}
	}
	if g.isProtected(root, clean) {
		return "", fmt.Errorf("%q: %w", rel, ErrProtected)
	}
	target := filepath.Join(root, clean)
	if fi, err := os.Lstat(target); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return "", fmt.Errorf("%q is a symlink; not following it", rel)
	}
	return target, nil
}

// Contains reports whether path lies inside dir (or is dir), with links
// resolved where the paths exist: what an agent working in dir could reach.
func Contains(dir, path string) bool {
	if path == "" || dir == "" {
		return false
	}
	resolve := func(p string) string {
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
		// A path that does not exist yet: resolve its nearest existing parent.
		if r, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
			return filepath.Join(r, filepath.Base(p))
		}
		return filepath.Clean(p)
	}
	rel, err := filepath.Rel(resolve(dir), resolve(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// InGitRepo reports whether dir lies in a git repository: it, or a folder
// above it, holds .git.
func InGitRepo(dir string) bool {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return true
		}
		if filepath.Dir(d) == d {
			return false
		}
	}
}
