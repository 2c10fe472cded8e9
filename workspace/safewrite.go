package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrLinkedTarget is returned by WriteArtifact for a target that is a
// symlink or has other hard links: a link planted to make Purser overwrite a
// file elsewhere (STATUS.md -> ~/.ssh/authorized_keys).
var ErrLinkedTarget = errors.New("is a symlink or a hard link; not writing through it")

// WriteArtifact writes body to the file name at the root of workspace
// (STATUS.md, BUDGET.md) without ever writing through a link. A target that
// is a symlink or has more than one hard link is refused with
// ErrLinkedTarget, naming the file, and left as it is. Otherwise body goes
// to a new file in the workspace root, renamed over the target: rename
// replaces the directory entry and never follows it, so even a link planted
// between the check and the rename is replaced, not written through.
func WriteArtifact(workspace, name string, body []byte) error {
	if clean, err := CheckRelative(name); err != nil || clean != name || filepath.Base(name) != name {
		return fmt.Errorf("write %s: want a plain file name at the workspace root", name)
	}
	target := filepath.Join(workspace, name)
	fi, err := os.Lstat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("write %s: %w", name, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("write %s: it %w (a symlink was planted in the workspace)", name, ErrLinkedTarget)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("write %s: it is not a regular file (%s)", name, fi.Mode().Type())
	case linkCount(fi) > 1:
		return fmt.Errorf("write %s: it %w (%d hard links: one was planted in the workspace)", name, ErrLinkedTarget, linkCount(fi))
	}
	if err := replace(target, body, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// ReplaceFile writes content to target as a new file renamed over it, so
// the old directory entry is replaced, never written through: a file
// outside the workspace hard-linked to target keeps its content, and a
// symlink at target is replaced by a file. An existing regular file keeps
// its permission bits; a new one gets perm.
func ReplaceFile(target string, content []byte, perm fs.FileMode) error {
	if fi, err := os.Lstat(target); err == nil && fi.Mode().IsRegular() {
		perm = fi.Mode().Perm()
	}
	return replace(target, content, perm)
}

// replace writes content to a temporary file beside target (created with
// O_EXCL, so it follows nothing) and renames it over target.
func replace(target string, content []byte, perm fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(target), ".purser-write-*")
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(content); err != nil {
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		return err
	}
	done = true
	return nil
}

// linkCount is how many hard links fi has (1 where the platform does not
// say).
func linkCount(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
