package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path/filepath"
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
	err := filepath.WalkDir(workspace, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(workspace, path)
		switch {
		case d.IsDir() && (d.Name() == ".git" || d.Name() == ".purser"):
			return filepath.SkipDir
		case !d.IsDir() && filepath.Dir(rel) == "." && IsArtifactName(rel):
			return nil
		}
		if n++; n > maxFingerprintFiles {
			return fs.ErrInvalid
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00%s\x00%d\n", rel, info.Size(), info.Mode(), info.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}
