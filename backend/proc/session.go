package proc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// ReadLines reads a whole session file that its writer has stopped writing,
// one line at a time, with the Follower's safety: no symbolic link, only a
// regular file, at most DefaultFollowLimit read. A last line without its
// newline is passed on too. A file that is not there is an error.
func ReadLines(path string, fn func(line []byte)) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("session file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("session file %s is not a regular file (%s)", path, fi.Mode().Type())
	}
	f := &Follower{Find: func() string { return path }, OnLine: func(l Line) {
		if !l.TooLong {
			fn(l.Text)
		}
	}}
	f.Every(time.Hour)() // no tick: the one last poll reads it all
	return f.Err()
}

// headLines is how many lines of a candidate session file are read to tell
// when it started and where.
const headLines = 64

// SessionHead tells, from the first lines of a session file, when the CLI
// started it and in which directory (the zero time or "" when the lines do
// not say).
type SessionHead func(path string, lines [][]byte) (started time.Time, dir string)

// LocateSession finds the session file of a call that was killed before
// its backend could record it: among the files the patterns match, the one
// a CLI started in the call's workspace at or after the call started, that
// no other call of the task recorded as its own. Only a single such file is
// taken: with two or more, which is the call's cannot be told (another task
// working in the same workspace at the same time), and none is read, since
// another call's usage must never be counted for this one. It returns the
// file ("" when none is taken) and a note saying how it was found or why
// none was.
func LocateSession(q purser.SpendQuery, patterns []string, head SessionHead) (file, note string) {
	// A CLI starts its session after the call record's StartedAt; the
	// files' times are in milliseconds.
	since := q.Call.StartedAt.Truncate(time.Millisecond)
	ws := canonical(q.Workspace)
	var found []string
	for _, pattern := range patterns {
		matches, _ := filepath.Glob(pattern)
		sort.Strings(matches)
		for _, m := range matches {
			if q.Claimed != nil && q.Claimed(m) {
				continue
			}
			if fi, err := os.Lstat(m); err != nil || !fi.Mode().IsRegular() || fi.ModTime().Before(since) {
				continue
			}
			var lines [][]byte
			n := 0
			_ = readHead(m, func(l []byte) bool {
				lines = append(lines, append([]byte(nil), l...))
				n++
				return n < headLines
			})
			started, dir := head(m, lines)
			if started.IsZero() || started.Before(since) || canonical(dir) != ws {
				continue
			}
			found = append(found, m)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Sprintf("none recorded, and no session file of %s started after the call did", q.Workspace)
	case 1:
		return found[0], "none recorded; located as the only session file of the workspace started after the call did"
	}
	return "", fmt.Sprintf("none recorded, and %d session files of %s started after the call did: none read, since which is the call's cannot be told", len(found), q.Workspace)
}

// readHead passes the first lines of a file to fn until it returns false.
func readHead(path string, fn func([]byte) bool) error {
	more := true
	f := &Follower{Find: func() string { return path }, MaxTotal: 4 << 20, OnLine: func(l Line) {
		if more && !l.TooLong {
			more = fn(l.Text)
		}
	}}
	f.Poll()
	return f.Err()
}

// canonical is a directory with its symbolic links resolved, so that a
// workspace named through a link is the same as the CLI's real cwd.
func canonical(dir string) string {
	if dir == "" {
		return ""
	}
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		return filepath.Clean(r)
	}
	return filepath.Clean(dir)
}

// Gone is a recorded session file (file, as the call recorded it in
// q.Call.Session) gone since (the CLI removes a session it deems empty):
// then it returns "" and a note saying so, what naming the file ("chat
// file"), and the wire journal may still hold the call; else file and note
// unchanged.
func Gone(q purser.SpendQuery, what, file, note string) (string, string) {
	if file != "" && q.Call.Session == file {
		if _, err := os.Lstat(file); errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Sprintf("%s %s is gone", what, file)
		}
	}
	return file, note
}

// RecoverFrom is a SpendRecoverer's answer from a call's session file
// (file, "" when none was found; note says how it was found): the file read
// whole with feed (a new parser's), then Recovered. backend names the CLI
// in an error.
func RecoverFrom(q purser.SpendQuery, backend, file, note string, feed func(line []byte) []budget.UsageEvent, oneSum bool) (purser.RecoveredSpend, error) {
	var usage []budget.UsageEvent
	if file != "" {
		if err := ReadLines(file, func(l []byte) { usage = append(usage, feed(l)...) }); err != nil {
			return purser.RecoveredSpend{Session: file, Note: note}, fmt.Errorf("%s: %w", backend, err)
		}
	}
	return Recovered(q, file, note, usage, oneSum)
}
