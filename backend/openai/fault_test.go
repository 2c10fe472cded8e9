package openai_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/budget"
)

// Every fault a Chat Completions server can show, classified as on every
// backend; the stall window is short so that the stalls are seen, and the
// test asserts how the call ended, not how fast.
func TestOpenAIFaults(t *testing.T) {
	closedPort := func(t *testing.T) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return "http://" + addr
	}
	serve := func(h http.HandlerFunc) func(t *testing.T) string {
		return func(t *testing.T) string {
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			return srv.URL
		}
	}
	status := func(code int, retryAfter string) func(t *testing.T) string {
		return serve(func(w http.ResponseWriter, r *http.Request) {
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			http.Error(w, `{"error":{"message":"injected"}}`, code)
		})
	}
	// silent accepts connections and never answers.
	silent := func(t *testing.T) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				t.Cleanup(func() { c.Close() })
			}
		}()
		return "http://" + l.Addr().String()
	}
	firstChunk := `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hel"}}]}` + "\n\n"
	stalledStream := serve(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte(firstChunk))
		w.(http.Flusher).Flush()
		<-r.Context().Done() // never another byte
	})
	droppedStream := serve(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Content-Length", "4096")
		w.Write([]byte(firstChunk))
		w.(http.Flusher).Flush()
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
	})
	for _, tc := range []struct {
		name       string
		server     func(t *testing.T) string
		fault      proc.Fault
		retryAfter time.Duration
	}{
		{"refused connection", closedPort, proc.FaultRefused, 0},
		{"429 with Retry-After", status(429, "7"), proc.FaultRateLimit, 7 * time.Second},
		{"429 without Retry-After", status(429, ""), proc.FaultRateLimit, 0},
		{"500", status(500, ""), proc.FaultServer, 0},
		{"503", status(503, ""), proc.FaultServer, 0},
		{"dropped stream", droppedStream, proc.FaultDropped, 0},
		{"accepted, never answered", silent, proc.FaultStalled, 0},
		{"stalled stream", stalledStream, proc.FaultStalled, 0},
		{"400", status(400, ""), proc.FaultFatal, 0},
		{"401", status(401, ""), proc.FaultFatal, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := tc.server(t)
			_, err := newBackend(t, url).Call(context.Background(), purser.CallRequest{Model: "m", Prompt: "p", Workspace: t.TempDir(),
				StallTimeout: 2 * time.Second}, func(budget.UsageEvent) {})
			if tc.fault == proc.FaultStalled {
				var se *purser.StallError
				if !errors.As(err, &se) || !errors.Is(err, purser.ErrTransient) {
					t.Fatalf("%v: want the call ended as stalled, transient", err)
				}
				return
			}
			var fe *proc.FaultError
			if !errors.As(err, &fe) || fe.Fault != tc.fault || fe.RetryAfter != tc.retryAfter {
				t.Fatalf("%v: want %s, retry after %s", err, tc.fault, tc.retryAfter)
			}
			if errors.Is(err, purser.ErrTransient) != tc.fault.Transient() {
				t.Fatalf("%v: transient %v, want %v", err, errors.Is(err, purser.ErrTransient), tc.fault.Transient())
			}
		})
	}
}
