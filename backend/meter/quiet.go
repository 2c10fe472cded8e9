package meter

import (
	"bytes"
	"io"
	"log"
	"sync"
	"sync/atomic"
)

// transportLines are what net/http's client side prints through the
// standard logger: it has no ErrorLog to give it, unlike the ReverseProxy and
// the Server. The idle-channel line comes when a provider (or a mock) sends
// bytes on a keep-alive connection nobody asked on: the transport drops that
// connection and dials again, so nothing is lost and the user has nothing to
// do — yet the raw line landed in the middle of purser's output.
var transportLines = [][]byte{
	[]byte("Unsolicited response received on idle HTTP channel"),
	[]byte("Error enabling Transport HTTP/2 support"),
	[]byte("http2: "),
}

// quietWriter sits in front of the standard logger's writer: it drops the
// transport's lines (counting them) and passes every other line on.
type quietWriter struct {
	next io.Writer
}

// quieted counts the transport lines dropped, for tests and debugging.
var quieted atomic.Int64

func (w *quietWriter) Write(p []byte) (int, error) {
	for _, l := range transportLines {
		if bytes.Contains(p, l) {
			quieted.Add(1)
			return len(p), nil
		}
	}
	return w.next.Write(p)
}

var quietMu sync.Mutex

// quietTransportLogs puts a quietWriter in front of the standard logger's
// writer unless one is there already. The standard logger is the process's;
// Purser itself never writes to it (it logs with slog), so only the lines of
// libraries pass through here, and only net/http's client lines are held back.
func quietTransportLogs() {
	quietMu.Lock()
	defer quietMu.Unlock()
	if _, ok := log.Writer().(*quietWriter); !ok {
		log.SetOutput(&quietWriter{next: log.Writer()})
	}
}
