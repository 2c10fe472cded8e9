package meter_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purser-dev/purser/backend/meter"
)

// BenchmarkReply measures one streamed Anthropic reply (a message of 200
// content deltas, its usage journalled) fetched directly and through the
// meter: what the meter adds to each model call.
func BenchmarkReply(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":1200,\"cache_creation_input_tokens\":300,\"cache_read_input_tokens\":4000,\"output_tokens\":1}}}\n\n")
	for i := range 200 {
		fmt.Fprintf(&sb, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"token %d \"}}\n\n", i)
	}
	sb.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":200}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	reply := sb.String()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, reply)
	}))
	defer up.Close()
	m, err := meter.Start(up.URL, filepath.Join(b.TempDir(), "journal.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	client := &http.Client{Transport: &http.Transport{}}
	for _, tc := range []struct{ name, url string }{{"direct", up.URL}, {"metered", m.URL()}} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(reply)))
			for b.Loop() {
				resp, err := client.Post(tc.url+"/v1/messages", "application/json", strings.NewReader(`{"model":"claude-sonnet-4-5","stream":true}`))
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if n != int64(len(reply)) {
					b.Fatalf("read %d bytes of %d", n, len(reply))
				}
			}
		})
	}
	if m.Replies() == 0 {
		b.Fatal("the meter journalled no reply")
	}
}
