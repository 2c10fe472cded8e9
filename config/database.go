package config

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
)

// DefaultDatabase is where a project's database lives when nothing names
// one: in the user's state directory ($XDG_STATE_HOME/purser, by default
// ~/.local/state/purser), in a folder named after the project's directory
// and a hash of its path. That is outside every workspace, so no agent can
// read or rewrite the ledger that enforces its budget, and two projects
// never share a ledger by accident. Without a home directory it falls back
// to .purser/purser.db in the project's directory.
func DefaultDatabase(projectDir string) string {
	state := os.Getenv("XDG_STATE_HOME")
	if state == "" || !filepath.IsAbs(state) {
		home, err := os.UserHomeDir()
		if err != nil || home == "" || !filepath.IsAbs(home) {
			return filepath.Join(projectDir, ".purser", "purser.db")
		}
		state = filepath.Join(home, ".local", "state")
	}
	sum := sha256.Sum256([]byte(projectDir))
	name := filepath.Base(projectDir) + "-" + hex.EncodeToString(sum[:6])
	return filepath.Join(state, "purser", "projects", name, "purser.db")
}
