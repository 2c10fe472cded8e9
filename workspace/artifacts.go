package workspace

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
)

// StatusHeader begins the first line of every STATUS.md Purser writes,
// followed by the task's ID: it tells whose the file at a workspace's root
// is when several tasks share the workspace.
const StatusHeader = "# Status: task "

// Artifacts are where one task's STATUS.md and BUDGET.md go in its
// workspace, as plain file names at the root.
type Artifacts struct {
	Status, Budget string
}

// ArtifactsOf says where the task taskID writes its STATUS.md and
// BUDGET.md in workspace. A workspace's STATUS.md and BUDGET.md are the
// first task's to write them (the single-task case: the files a newcomer
// looks for). Another task sharing the workspace writes STATUS.<id>.md and
// BUDGET.<id>.md beside them, so that neither overwrites the other's; a
// task that has written its own names once keeps them. The root files'
// owner is read from STATUS.md's first line (StatusHeader), which no agent
// may write (protectedRel).
func ArtifactsOf(workspace, taskID string) Artifacts {
	own := Artifacts{Status: "STATUS." + taskID + ".md", Budget: "BUDGET." + taskID + ".md"}
	if _, err := os.Lstat(filepath.Join(workspace, own.Status)); err == nil {
		return own
	}
	if owner, ok := statusOwner(filepath.Join(workspace, StatusFile)); ok && owner != taskID {
		return own
	}
	return Artifacts{Status: StatusFile, Budget: BudgetFile}
}

// statusOwner is the task whose STATUS.md path is, and false when there is
// no such file (or it is not one of Purser's): then it is no task's.
func statusOwner(path string) (string, bool) {
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return "", false
	}
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil && line == "" {
		return "", false
	}
	id, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), StatusHeader)
	return id, ok && id != ""
}

// IsArtifactName reports whether name, a file at a workspace's root, is
// one Purser writes there: STATUS.md, BUDGET.md, or a task's own
// STATUS.<id>.md or BUDGET.<id>.md (in any case, for a case-insensitive
// file system).
func IsArtifactName(name string) bool {
	for _, base := range artifactNames {
		if strings.EqualFold(name, base) {
			return true
		}
		stem := strings.TrimSuffix(base, ".md") + "."
		if len(name) > len(stem)+len(".md") && strings.EqualFold(name[:len(stem)], stem) && strings.EqualFold(name[len(name)-3:], ".md") {
			return true
		}
	}
	return false
}
