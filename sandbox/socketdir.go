package sandbox

import (
	"os"
	"path/filepath"
)

// maxSocketPath is the longest path a unix socket may be bound at on
// Linux (sun_path is 108 bytes, NUL included).
const maxSocketPath = 107

// SocketDir makes a private (0700) directory for unix sockets named up to
// nameLen bytes: under $TMPDIR when the socket's path fits there, else
// under /tmp, since a long $TMPDIR (a CI job's, a test's) would pass the
// limit and the socket could not be bound. The caller removes it.
func SocketDir(prefix string, nameLen int) (string, error) {
	base := os.TempDir()
	// MkdirTemp adds up to 20 digits; then a separator and the name.
	if len(filepath.Join(base, prefix))+20+1+nameLen > maxSocketPath {
		base = "/tmp"
	}
	return os.MkdirTemp(base, prefix)
}
