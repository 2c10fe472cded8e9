package proc_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser/backend/proc"
)

// A followed file is read as it grows: each line once, in order, numbered
// as in the file (blank lines too); a line is passed on only once its
// newline is written, or when following stops, since its writer is gone; a
// line longer than MaxLine is passed on with its number but not its text.
func TestFollowerReadsEachLineOnceAsTheFileGrows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.jsonl")
	file, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var got []string
	f := &proc.Follower{Find: func() string { return path }, MaxLine: 10, OnLine: func(l proc.Line) {
		text := string(l.Text)
		if l.TooLong {
			text = "<too long>"
		}
		got = append(got, strconv.Itoa(l.N)+":"+text)
	}}
	steps := []struct {
		write string
		want  string // all lines passed on so far
	}{
		{"", ""},
		{"one\ntw", "1:one"},
		{"o\n\n", "1:one,2:two,3:"},
		{"0123456", "1:one,2:two,3:"},
		{"789abcdef\nfour", "1:one,2:two,3:,4:<too long>"},
	}
	for _, s := range steps {
		if _, err := file.WriteString(s.write); err != nil {
			t.Fatal(err)
		}
		f.Poll()
		if strings.Join(got, ",") != s.want {
			t.Fatalf("after writing %q: lines %q, want %q", s.write, strings.Join(got, ","), s.want)
		}
	}
	stop := f.Every(time.Hour) // no tick: only the final poll reads
	stop()
	if want := "1:one,2:two,3:,4:<too long>,5:four"; strings.Join(got, ",") != want {
		t.Fatalf("after stopping: lines %q, want %q", strings.Join(got, ","), want)
	}
}

// A file that cannot be told yet is looked for again at each poll.
func TestFollowerWaitsForItsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "late.jsonl")
	known := false
	var got []string
	f := &proc.Follower{Find: func() string {
		if !known {
			return ""
		}
		return path
	}, OnLine: func(l proc.Line) { got = append(got, string(l.Text)) }}
	f.Poll()
	if err := os.WriteFile(path, []byte("a\nb\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.Poll()
	if len(got) != 0 {
		t.Fatalf("read %q before the file could be told", got)
	}
	known = true
	f.Poll()
	if strings.Join(got, ",") != "a,b" {
		t.Fatalf("lines %q", got)
	}
}
