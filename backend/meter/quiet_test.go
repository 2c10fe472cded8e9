package meter_test

import (
	"bufio"
	"bytes"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser/backend/meter"
)

// The transport's complaints never reach purser's stderr (issue 22 item
// 12): an upstream that answers again on an idle keep-alive connection made
// net/http print "Unsolicited response received on idle HTTP channel" through
// the standard logger, raw into the middle of purser's output.
func TestTransportLogsStayOffTheStandardLogger(t *testing.T) {
	var buf syncBuffer
	prev, flags := log.Writer(), log.Flags()
	log.SetOutput(&buf)
	t.Cleanup(func() { log.SetOutput(prev); log.SetFlags(flags) })

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"))
		time.Sleep(100 * time.Millisecond) // the connection is idle in the meter's pool by now
		_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
		// The transport closes the connection after it has logged (or not).
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, _ = br.ReadByte()
	}()
	quietedBefore := meter.Quieted()
	m, _ := startMeter(t, "http://"+ln.Addr().String())
	if got := post(t, m.URL()+"/v1/messages", `{}`); got != "{}" {
		t.Fatalf("reply %q", got)
	}
	select {
	case <-closed:
	case <-time.After(15 * time.Second):
		t.Fatal("the meter's transport never dropped the idle connection that was answered unasked")
	}
	if out := buf.String(); out != "" {
		t.Fatalf("the standard logger (purser's stderr) received %q", out)
	}
	// The transport logs around the time it drops the connection, not
	// always before: wait for its line to land somewhere.
	for deadline := time.Now().Add(10 * time.Second); meter.Quieted() == quietedBefore && buf.String() == "" && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if meter.Quieted() == quietedBefore {
		t.Fatal("the transport said nothing: the test did not make the situation happen")
	}
	// Other lines on the standard logger still pass.
	log.Print("someone else's line")
	if !strings.Contains(buf.String(), "someone else's line") {
		t.Fatalf("the standard logger lost another line: %q", buf.String())
	}
}

// syncBuffer is a bytes.Buffer the transport's goroutines may write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
