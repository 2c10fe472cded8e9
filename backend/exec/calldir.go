package exec

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/purser-dev/purser/backend/proc"
)

// callDirPrefix names a call's folder of prompt and usage files.
const callDirPrefix = "purser-exec-"

// ownerFile, in a call's folder, holds the owner ID (proc.Owners) of the
// Purser that made it: a Purser killed mid-call cannot remove its folder,
// and the next call, in any Purser, removes it once that owner is gone.
const ownerFile = "owner"

// callDir makes a call's folder in root (the temporary directory when
// empty), marked with this process as its owner, after removing the
// folders that killed Pursers left there.
func callDir(root string) (string, error) {
	if root == "" {
		root = os.TempDir()
	}
	RemoveDeadCallDirs(root)
	dir, err := os.MkdirTemp(root, callDirPrefix)
	if err != nil {
		return "", fmt.Errorf("exec: the call's folder: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(proc.Owners{}.Self()), 0o600); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("exec: the call's folder: %w", err)
	}
	return dir, nil
}

// RemoveDeadCallDirs removes the call folders in root whose owner is known
// to be gone (a Purser killed mid-call), and returns how many. A folder
// is left alone when it is not this user's, when its owner file is missing
// or not a plain file (a folder of an older Purser, or one being made),
// or when its owner is alive or on another host.
func RemoveDeadCallDirs(root string) int {
	entries, err := os.ReadDir(root)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), callDirPrefix) {
			continue
		}
		dir := filepath.Join(root, e.Name())
		if !ownedByMe(dir) {
			continue
		}
		f := filepath.Join(dir, ownerFile)
		if fi, err := os.Lstat(f); err != nil || !fi.Mode().IsRegular() || fi.Size() > 4096 {
			continue
		}
		owner, err := os.ReadFile(f)
		if err != nil || len(strings.Fields(string(owner))) != 3 || !(proc.Owners{}).Gone(string(owner)) {
			continue
		}
		if os.RemoveAll(dir) == nil {
			n++
		}
	}
	return n
}

// ownedByMe reports whether dir is a real folder (not a link) of this
// user: in a shared temporary directory another user's folder is never
// touched.
func ownedByMe(dir string) bool {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}
