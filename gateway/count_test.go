package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/gateway"
)

// billingProvider is an httptest Anthropic upstream that bills a request's
// input at bytesPerToken bytes a token (tool schemas' JSON runs far above
// four) and its output at the max_tokens it was sent, streamed.
func billingProvider(t *testing.T, bytesPerToken int, delay time.Duration) *httptest.Server {
	var rate atomic.Int64
	rate.Store(int64(bytesPerToken))
	return billingProviderAt(t, &rate, delay)
}

// billingProviderAt is billingProvider at a rate the test may change; each
// reply's output comes delay after its message_start.
func billingProviderAt(t *testing.T, bytesPerToken *atomic.Int64, delay time.Duration) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var maxTok int64
		if i := strings.Index(string(b), `"max_tokens":`); i >= 0 {
			_, _ = fmt.Sscanf(string(b[i+len(`"max_tokens":`):]), "%d", &maxTok)
		}
		in := (int64(len(b)) + bytesPerToken.Load() - 1) / bytesPerToken.Load()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":%d}}}\n\n", in)
		w.(http.Flusher).Flush()
		time.Sleep(delay)
		fmt.Fprintf(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":%d}}\n\n", maxTok)
	}))
	t.Cleanup(up.Close)
	return up
}

func anthropicBody(model string, textBytes int) string {
	return `{"model":"` + model + `","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("x", textBytes) + `"}]}`
}

// The first request to a provider and model is counted at bytes/4; its
// reply's billed input teaches the door the rate, and the requests after
// it, on this lane and on a later lane (a CLI's next call), are counted at
// that rate plus a quarter — tighter, and never under what was billed.
// The rate belongs to its upstream and model: another model starts at
// bytes/4 again, and a denser reply raises the rate; past bytes/4 the rate
// is counted with no margin.
func TestDoorLearnsTheInputRateFromBilledReplies(t *testing.T) {
	var rate atomic.Int64
	rate.Store(20)
	up := billingProviderAt(t, &rate, 0)
	adm := &admitter{grant: purser.WireGrant{MaxOutputTokens: 100}}
	send := func(body string) {
		t.Helper()
		l := open(t, context.Background(), gateway.LaneConfig{Protocol: gateway.Anthropic, Upstream: up.URL, Admit: adm, Report: func(ev budgetEvent) {}})
		if status, reply := do(t, "POST", l.URL()+"/v1/messages", map[string]string{"x-api-key": l.Token()}, body); status != 200 {
			t.Fatalf("status %d %s", status, reply)
		}
		_ = l.Close()
	}
	first, second, other := anthropicBody("m", 40_000), anthropicBody("m", 60_000), anthropicBody("n", 40_000)
	send(first)
	send(second)
	send(other)
	if len(adm.got) != 3 {
		t.Fatalf("%d admissions; want 3", len(adm.got))
	}
	billedFirst, billedSecond := int64((len(first)+19)/20), int64((len(second)+19)/20)
	if got, want := adm.got[0].InputTokens, int64((len(first)+3)/4); got != want {
		t.Errorf("first request counted %d tokens; want bytes/4 = %d", got, want)
	}
	// The rate learned of the first reply, plus a quarter: 1.25 × 1/20.
	got := adm.got[1].InputTokens
	if got < billedSecond || got > billedSecond*5/4+2 {
		t.Errorf("second request (billed %d) counted %d tokens; want at least what is billed and at most a quarter more", billedSecond, got)
	}
	if got >= int64(len(second)/4) {
		t.Errorf("second request counted %d tokens, no tighter than bytes/4 (%d)", got, len(second)/4)
	}
	if got, want := adm.got[2].InputTokens, int64((len(other)+3)/4); got != want {
		t.Errorf("another model's first request counted %d tokens; want bytes/4 = %d", got, want)
	}
	t.Logf("billed %d then %d tokens: counted %d (bytes/4) then %d (learned)", billedFirst, billedSecond, adm.got[0].InputTokens, got)

	// A reply billing more a byte than any before raises the rate: the
	// request after it is counted at the denser rate, plus a quarter.
	rate.Store(5)
	send(first)
	send(second)
	billedDense := int64((len(second) + 4) / 5)
	if got := adm.got[4].InputTokens; got < billedDense || got > billedDense*5/4+2 {
		t.Errorf("after a denser reply, a request billed %d counted %d tokens; want the denser rate plus at most a quarter", billedDense, got)
	}
	// And no reply lowers it.
	rate.Store(40)
	send(first)
	send(second)
	if got := adm.got[6].InputTokens; got < billedDense {
		t.Errorf("a sparser reply lowered the count to %d tokens, under the %d a denser reply billed", got, billedDense)
	}
	// A rate past bytes/4 (2 bytes a token) is the count by itself: the
	// margin never takes a count past bytes/4.
	rate.Store(2)
	send(first)
	send(first)
	billedDenser := int64((len(first) + 1) / 2)
	if got := adm.got[8].InputTokens; got < billedDenser || got > billedDenser+1 {
		t.Errorf("at 2 bytes a token, a request billed %d counted %d tokens; want the rate alone", billedDenser, got)
	}
}

// budgetEvent keeps the tests' Report funcs short.
type budgetEvent = budget.UsageEvent

// 64 concurrent streaming requests near a token cap, each reserving its
// counted input and output bound (the door's admission), once one reply
// taught the door the provider's rate: more of them are admitted than
// bytes/4 lets in at once, and the cap is still never passed, not by a
// token. The provider streams each reply's output 200 ms after its start,
// so the requests are in flight together.
func TestDoorLearnedCountKeepsTheCapUnderConcurrency(t *testing.T) {
	up := billingProvider(t, 16, 200*time.Millisecond)
	body := anthropicBody("m", 8_000)
	l := open(t, context.Background(), gateway.LaneConfig{Protocol: gateway.Anthropic, Upstream: up.URL, Report: func(budgetEvent) {}})
	if status, reply := do(t, "POST", l.URL()+"/v1/messages", map[string]string{"x-api-key": l.Token()}, body); status != 200 {
		t.Fatalf("status %d %s", status, reply)
	}
	_ = l.Close()
	const capTokens = 20_000
	adm := &capAdmitter{cap: capTokens, reserve: true}
	l = open(t, context.Background(), gateway.LaneConfig{Protocol: gateway.Anthropic, Upstream: up.URL, Admit: adm, Report: adm.book})
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if status, _ := do(t, "POST", l.URL()+"/v1/messages", map[string]string{"x-api-key": l.Token()}, body); status == 200 {
				mu.Lock()
				admitted++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	_ = l.Close()
	if adm.used > capTokens {
		t.Errorf("64 concurrent requests spent %d tokens of a %d cap", adm.used, capTokens)
	}
	// At bytes/4 each request holds its bytes/4 and its 100 output tokens:
	// at most this many fit the cap at once.
	atOnce := capTokens / ((len(body)+3)/4 + 100)
	if admitted <= atOnce {
		t.Errorf("at the learned rate %d of 64 requests were admitted; bytes/4 lets %d in at once: the count is no tighter", admitted, atOnce)
	}
	t.Logf("cap 20,000: %d of 64 admitted at the learned rate (bytes/4: %d at once), %d tokens spent", admitted, atOnce, adm.used)
}

// rateChild names, to the test binary started again as a second process,
// the fake provider its one request goes to.
const rateChild = "PURSER_GATEWAY_RATE_CHILD"

// TestRateChildProcess is one Purser process for
// TestDoorRemembersTheRateAcrossProcesses: it sends one request and says
// how the door counted its input.
func TestRateChildProcess(t *testing.T) {
	up := os.Getenv(rateChild)
	if up == "" {
		t.Skip("started by TestDoorRemembersTheRateAcrossProcesses")
	}
	gateway.KeepLoopbackRates()
	adm := &admitter{grant: purser.WireGrant{MaxOutputTokens: 100}}
	l := open(t, context.Background(), gateway.LaneConfig{Protocol: gateway.Anthropic, Upstream: up, Admit: adm, Report: func(budgetEvent) {}})
	if status, reply := do(t, "POST", l.URL()+"/v1/messages", map[string]string{"x-api-key": l.Token()}, anthropicBody("m", 40_000)); status != 200 {
		t.Fatalf("status %d %s", status, reply)
	}
	_ = l.Close()
	fmt.Printf("COUNTED %d\n", adm.got[0].InputTokens)
}

// Issue 21, the first request tighter than bytes/4: the rate one process
// learned is kept in Purser's state directory, so a second process's first
// request is counted at it (plus its margin): below bytes/4, and still at
// or above what the provider bills. The file is small and holds no body;
// a corrupt one is no error, the count is bytes/4 again, and the next
// reply writes a good file.
func TestDoorRemembersTheRateAcrossProcesses(t *testing.T) {
	if os.Getenv(rateChild) != "" {
		t.Skip("the child process runs TestRateChildProcess only")
	}
	up := billingProvider(t, 20, 0)
	state := t.TempDir()
	process := func() int64 {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestRateChildProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state, rateChild+"="+up.URL)
		out, err := cmd.CombinedOutput()
		m := regexp.MustCompile(`COUNTED (\d+)`).FindSubmatch(out)
		if err != nil || m == nil {
			t.Fatalf("the second process: %v\n%s", err, out)
		}
		n, _ := strconv.ParseInt(string(m[1]), 10, 64)
		return n
	}
	body := anthropicBody("m", 40_000)
	floor, billed := int64((len(body)+3)/4), int64((len(body)+19)/20)
	if got := process(); got != floor {
		t.Fatalf("first process, first request: counted %d; want bytes/4 = %d (nothing learned yet)", got, floor)
	}
	file := filepath.Join(state, "purser", "door-rates.json")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("no rate file after a billed reply: %v", err)
	}
	if fi, _ := os.Stat(file); len(b) > 1024 || strings.Contains(string(b), "xxxx") || fi.Mode().Perm() != 0o600 {
		t.Fatalf("rate file %s (%v): %d bytes, want a small 0600 file of rates, no body:\n%s", file, fi.Mode(), len(b), b)
	}
	got := process()
	if got >= floor || got < billed {
		t.Fatalf("second process, first request: counted %d; want below bytes/4 (%d) and at least the %d billed", got, floor, billed)
	}
	t.Logf("billed %d: a first request counted %d at bytes/4, %d in the next process", billed, floor, got)

	if err := os.WriteFile(file, []byte(`{"version":1,"rates":[{"upstream":`), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := process(); got != floor {
		t.Fatalf("with a corrupt rate file: counted %d; want bytes/4 = %d", got, floor)
	}
	if got := process(); got >= floor || got < billed {
		t.Fatalf("after a corrupt file was rewritten: counted %d; want below bytes/4 (%d) and at least %d", got, floor, billed)
	}
}
