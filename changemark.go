package purser

import "context"

// ChangeMarker is a store that can tell, in one cheap read, whether
// anything was committed to it since it was last asked: the dashboard and
// /metrics serve what they last read while the mark stands, rather than
// reading every task and call again for each request (issue 24).
type ChangeMarker interface {
	// ChangeMark returns a value that differs from every value it
	// returned before a commit to the store (by this process or any other)
	// whenever that commit has happened since. It may differ more often;
	// it never stays the same across a commit. Read it before reading what
	// it guards, so that a commit made during the read moves the next mark.
	ChangeMark(ctx context.Context) (string, error)
}
