package engine

import "sync/atomic"

// CountFingerprints counts the fingerprints the engine takes of workspace
// (each a walk of it) until the returned undo is called.
func CountFingerprints(workspace string) (taken func() int64, undo func()) {
	n := &atomic.Int64{}
	fingerprintsTaken.Store(workspace, n)
	return n.Load, func() { fingerprintsTaken.Delete(workspace) }
}
