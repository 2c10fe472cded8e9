package contextbuild

import (
	"errors"
	"path/filepath"
	"strings"
	"sync"
)

// ErrProtected is returned by Writable for one of Purser's own files: the
// ledger, a transcript, STATUS.md/BUDGET.md or anything under .purser/.
// An agent's edit protocol may neither write nor delete them.
var ErrProtected = errors.New("one of Purser's own files; an agent may not write or delete it")

// StateDir is the directory name Purser keeps its own files under; every
// directory of that name, at any depth, is Purser's.
const StateDir = ".purser"

// artifactNames are the files Purser writes at a workspace's root.
var artifactNames = []string{"STATUS.md", "BUDGET.md"}

var protected struct {
	sync.RWMutex
	paths []string // real, lower-cased absolute paths
}

// Protect marks files as Purser's own wherever they are — a database and
// its -wal, -shm and -journal files, a transcript — so that no edit
// protocol writes or deletes them (or anything below them), and the
// workspace listing leaves them out. The files need not exist yet. It lasts
// for the life of the process.
func Protect(paths ...string) {
	protected.Lock()
	defer protected.Unlock()
	for _, p := range paths {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		protected.paths = append(protected.paths, foldKey(realPath(abs)))
	}
}

// ProtectDatabase protects an SQLite database file and its -wal, -shm and
// -journal companions.
func ProtectDatabase(path string) {
	Protect(path, path+"-wal", path+"-shm", path+"-journal")
}

// realPath resolves the symlinks of the longest existing directory prefix
// of the absolute path abs, and appends the rest as it is.
func realPath(abs string) string {
	rest := ""
	for dir := abs; ; dir = filepath.Dir(dir) {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(real, rest)
		}
		if dir == filepath.Dir(dir) {
			return abs
		}
		rest = filepath.Join(filepath.Base(dir), rest)
	}
}

// foldKey compares paths without regard to case: on a case-insensitive
// file system (macOS) .PURSER/Purser.db is the ledger. On others it only
// refuses a few more names.
func foldKey(p string) string { return strings.ToLower(p) }

// protectedRel reports whether the workspace-relative path rel (cleaned,
// inside the workspace) is Purser's by name: under a .purser directory, or
// STATUS.md/BUDGET.md at the workspace root (or a path below one of those).
func protectedRel(rel string) bool {
	parts := strings.Split(filepath.ToSlash(rel), "/")
	for _, name := range artifactNames {
		if strings.EqualFold(parts[0], name) {
			return true
		}
	}
	for _, part := range parts {
		if strings.EqualFold(part, StateDir) {
			return true
		}
	}
	return false
}

// protectedReal reports whether the real absolute path real is, or is
// below, a file given to Protect.
func protectedReal(real string) bool {
	key := foldKey(real)
	protected.RLock()
	defer protected.RUnlock()
	for _, p := range protected.paths {
		if key == p || strings.HasPrefix(key, p+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// isProtected reports whether the file at rel in the workspace whose real
// root is root is Purser's own, by its name as given or by where it really
// is.
func isProtected(root, rel string) bool {
	if protectedRel(rel) {
		return true
	}
	real := realPath(filepath.Join(root, rel))
	if r, err := filepath.Rel(root, real); err == nil && protectedRel(r) {
		return true
	}
	return protectedReal(real)
}
