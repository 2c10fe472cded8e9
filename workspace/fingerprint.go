package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
)

// maxFingerprintFiles bounds the walk: past it, a workspace's fingerprint is
// unknown.
const maxFingerprintFiles = 100_000

// Fingerprint sums up a workspace's files — each path with its size, mode
// and modification time — so that whether an agent changed anything can be
// told without reading a file. .git and .purser are left out, and so are
// STATUS.md and BUDGET.md (and a task's own STATUS.<id>.md and
// BUDGET.<id>.md), which Purser writes. It returns "" (unknown) for
// a workspace it cannot walk or that holds more than maxFingerprintFiles.
func Fingerprint(workspace string) string {
	h := sha256.New()
	n := 0
	// Each entry's line is made without fmt, and its path relative to the
	// workspace without filepath.Rel where WalkDir's own joining shows it:
	// the engine takes a fingerprint every iteration.
	var line []byte
	// A workspace named through a symlink is walked where it leads: WalkDir
	// does not descend into a symlinked root, and would sum up the link.
	root := filepath.Clean(workspace)
	if resolved, err := filepath.EvalSymlinks(root); err == nil {
		root = resolved
	}
	prefix := root + string(filepath.Separator)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, ok := strings.CutPrefix(path, prefix)
		if path == root {
			rel = "."
		} else if !ok {
			rel, _ = filepath.Rel(root, path)
		}
		switch {
		case d.IsDir() && (d.Name() == ".git" || d.Name() == ".purser"):
			return filepath.SkipDir
		case !d.IsDir() && !strings.ContainsRune(rel, filepath.Separator) && IsArtifactName(rel):
			return nil
		}
		if n++; n > maxFingerprintFiles {
			return fs.ErrInvalid
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		// rel NUL size NUL mode NUL mtime(ns) newline
		line = append(append(line[:0], rel...), 0)
		line = append(strconv.AppendInt(line, info.Size(), 10), 0)
		line = append(append(line, info.Mode().String()...), 0)
		line = append(strconv.AppendInt(line, info.ModTime().UnixNano(), 10), '\n')
		h.Write(line)
		return nil
	})
	if err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}
