package workspace

import (
	"errors"
	"path/filepath"
	"strings"
	"sync"
)

// ErrProtected is returned by Guard.Writable for one of Purser's own files:
// the ledger, a transcript, STATUS.md/BUDGET.md (and STATUS.<id>.md/BUDGET.<id>.md)
// or anything under .purser/.
// An agent's edit protocol may neither write nor delete them.
var ErrProtected = errors.New("one of Purser's own files; an agent may not write or delete it")

// StateDir is the directory name Purser keeps its own files under; every
// directory of that name, at any depth, is Purser's.
const StateDir = ".purser"

// The files Purser writes at a workspace's root when a task stops.
const (
	StatusFile = "STATUS.md"
	BudgetFile = "BUDGET.md"
)

// artifactNames are the files Purser writes at a workspace's root.
var artifactNames = []string{StatusFile, BudgetFile}

// FileOwner is a store or backend that keeps files of its own on this
// machine — a SQLite database and its journals, a transcript — which no
// agent may write or delete, wherever they are.
type FileOwner interface {
	// OwnFiles returns the files' paths; they need not exist yet.
	OwnFiles() []string
}

// Guard is the set of files a process keeps as Purser's own, besides those
// Purser's by name (StateDir, STATUS.md and BUDGET.md at a workspace's
// root): the edit protocols ask it where they may write, and the workspace
// listing what to leave out. The wiring makes one per process and hands it
// to everything that runs agents there, so that no agent of any task
// writes a file another part of the process keeps. It is safe for
// concurrent use. A nil *Guard protects Purser's files by name only; its
// Protect methods need a non-nil one.
type Guard struct {
	mu sync.RWMutex
	// paths are real, lower-cased absolute paths, each once: a worker's
	// engines protect the same store and transcripts job after job.
	paths map[string]struct{}
}

// NewGuard returns a Guard protecting paths (see Protect).
func NewGuard(paths ...string) *Guard {
	g := &Guard{}
	g.Protect(paths...)
	return g
}

// Protect marks files as Purser's own wherever they are — a database and
// its -wal, -shm and -journal files, a transcript — so that no edit
// protocol asking g writes or deletes them (or anything below them), and
// the workspace listing leaves them out. The files need not exist yet.
// They stay protected for the life of g.
func (g *Guard) Protect(paths ...string) {
	var keys []string
	for _, p := range paths {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		keys = append(keys, foldKey(realPath(abs)))
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paths == nil {
		g.paths = map[string]struct{}{}
	}
	for _, k := range keys {
		g.paths[k] = struct{}{}
	}
}

// ProtectDatabase protects an SQLite database file and its -wal, -shm and
// -journal companions.
func (g *Guard) ProtectDatabase(path string) {
	g.Protect(path, path+"-wal", path+"-shm", path+"-journal")
}

// ProtectFilesOf protects the files of v, a store or a backend, when it
// keeps files of its own (a FileOwner); anything else it leaves alone.
func (g *Guard) ProtectFilesOf(v any) {
	if o, ok := v.(FileOwner); ok {
		g.Protect(o.OwnFiles()...)
	}
}

// With returns a new Guard protecting what g protects and paths too: for a
// component that keeps files of its own whatever guard it is handed. g may
// be nil.
func (g *Guard) With(paths ...string) *Guard {
	w := NewGuard(paths...)
	if g != nil {
		g.mu.RLock()
		defer g.mu.RUnlock()
		for p := range g.paths {
			w.paths[p] = struct{}{}
		}
	}
	return w
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
// STATUS.md/BUDGET.md (or a task's STATUS.<id>.md/BUDGET.<id>.md, see
// IsArtifactName) at the workspace root (or a path below one of those).
func protectedRel(rel string) bool {
	parts := strings.Split(filepath.ToSlash(rel), "/")
	if IsArtifactName(parts[0]) {
		return true
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
func (g *Guard) protectedReal(real string) bool {
	if g == nil {
		return false
	}
	key := foldKey(real)
	g.mu.RLock()
	defer g.mu.RUnlock()
	for p := range g.paths {
		if key == p || strings.HasPrefix(key, p+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// isProtected reports whether the file at rel in the workspace whose real
// root is root is Purser's own, by its name as given or by where it really
// is.
func (g *Guard) isProtected(root, rel string) bool {
	if protectedRel(rel) {
		return true
	}
	real := realPath(filepath.Join(root, rel))
	if r, err := filepath.Rel(root, real); err == nil && protectedRel(r) {
		return true
	}
	return g.protectedReal(real)
}

// Hides reports whether a listing of the workspace whose real root is root
// leaves out the entry rel: Purser's by name, or a file g protects. It is
// for a walk below root that follows no symlink, so that root joined with
// rel is the entry's real path.
func (g *Guard) Hides(root, rel string) bool {
	return protectedRel(rel) || g.protectedReal(filepath.Join(root, rel))
}
