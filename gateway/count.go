package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The door counts a request's input before the provider does: admission
// holds that count plus the output bound, so the count must not fall short
// of what the provider will bill, or two requests near a cap could pass it
// together. No tokenizer of every provider runs offline (Anthropic's and
// Gemini's are not published; OpenAI's would count only OpenAI's models),
// so the door counts by the body's bytes:
//
//   - A request of a provider and model the door has not yet seen a reply
//     of (in this process, or in an earlier one: the rates are kept in
//     Purser's state directory, below) is counted at bytesPerToken: JSON's quotes, keys and escapes make
//     a body longer than its text, so bytes/4 of the body is at least the
//     text's own bytes/4 (English prose and code run 3.5–4.5 bytes a token).
//   - Each reply's own usage then says how many input tokens the provider
//     billed for how many bytes. The door keeps, per upstream and model, the
//     most tokens a byte has ever cost there, and counts every later request
//     at that rate plus learnMargin, never less than minCount. The margin
//     never takes the count past bytes/4, the count before any reply: where
//     the rate itself is past it (a provider billing a short body more than
//     its bytes/4, as the mock bills a side call 50 tokens whatever its
//     size), the count is the rate alone — still no less than bytes/4 or
//     than the densest reply seen. A tool
//     schema's JSON costs far fewer tokens a byte than prose (Claude Code's
//     first request is ~120 KB of which most is tool schemas): bytes/4 said
//     30,000 tokens where 5,560 were billed, so a small cap refused a
//     request that fitted many times over.
//
// The rate is learned only upward: a reply billing more a byte than any
// before raises it for every request after, and no reply lowers it. A
// request whose text is denser than anything the door has seen (a long
// stretch of CJK after English) can still be billed more than counted; the
// margin is there for that, and the reply's own usage is what the ledger
// books either way.
const bytesPerToken = 4

// learnMargin is what the door adds to a learned rate, in percent.
const learnMargin = 25

// minCount is the least the door counts a request's input at once it has
// learned a rate: a few tokens of framing that a short body's bytes do not
// show.
const minCount = 16

// rateScale is the fixed point of a learned rate: tokens per rateScale
// bytes (integers, so that counts are exact and repeatable).
const rateScale = 1_000_000

// rateKey is what a learned rate belongs to: the provider's tokenizer, by
// the upstream it is reached at (rateUpstream) and the model billed.
type rateKey struct{ upstream, model string }

// rates are the learned rates, shared by every lane of the process (a
// CLI's every call opens a lane of its own, and its second call's first
// request should be counted as well as its first call's last), and kept
// in Purser's state directory for the next process (ratefile.go): loaded
// before the process's first count.
var rates = struct {
	mu     sync.Mutex
	m      map[rateKey]int64
	at     map[rateKey]time.Time // when each rate was last raised, for the file's bound
	loaded bool
}{m: map[rateKey]int64{}, at: map[rateKey]time.Time{}}

// countInput is the door's count of the input tokens of a body of n bytes
// for model at upstream, and whether it came from a learned rate.
func countInput(upstream, model string, n int) (tokens int64, learned bool) {
	floor := (int64(n) + bytesPerToken - 1) / bytesPerToken
	rates.mu.Lock()
	loadRatesLocked()
	r := rates.m[rateKey{rateUpstream(upstream), model}]
	rates.mu.Unlock()
	if r == 0 || n == 0 {
		return floor, false
	}
	at := ceilDiv(int64(n)*r, rateScale)
	margin := ceilDiv(int64(n)*r*(100+learnMargin), rateScale*100)
	return max(at, min(margin, floor), minCount), true
}

// learnRate records that the provider billed billed input tokens for a
// body of n bytes sent for model at upstream, raising the rate when it
// cost more a byte than any reply before.
func learnRate(upstream, model string, n int, billed int64) {
	if n <= 0 || billed <= 0 || model == "" {
		return
	}
	// At most a token a byte: a body naming what it does not carry (a
	// file by its URI) says nothing of the rate of the bodies that do.
	r := min(ceilDiv(billed*rateScale, int64(n)), rateScale)
	k := rateKey{rateUpstream(upstream), model}
	rates.mu.Lock()
	loadRatesLocked()
	if r <= rates.m[k] {
		rates.mu.Unlock()
		return
	}
	rates.m[k], rates.at[k] = r, time.Now().UTC()
	keep := persisted(k)
	rates.mu.Unlock()
	if keep {
		saveRate(k, r)
	}
}

// ceilDiv is a/b rounded up, for a ≥ 0 and b > 0.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// The learned rates outlive the process: a small file in Purser's state
// directory ($XDG_STATE_HOME/purser/door-rates.json, else
// ~/.local/state/purser/door-rates.json) holds, per upstream and model,
// the rate and when it was last raised — never a body, a key, or a URL's
// credentials or query. It is read once, before the process's first count,
// and rewritten whole (a temporary file renamed over it) when a rate
// rises, merged with what other processes wrote meanwhile. It holds at
// most maxRates rates, the least recently raised dropped first. A file
// that is missing, unreadable or not ours is no error: the counts start at
// bytes/4, as without it, and the next rise writes a good one.
//
// A loopback upstream's rate is not kept: its port is most often an
// ephemeral one (a test's fake provider, a proxy started for one run), so
// the server found there next time need not be the one that billed.

// rateFileName is the file's name in Purser's state directory.
const rateFileName = "door-rates.json"

// maxRates bounds the rates the file holds.
const maxRates = 256

// maxRateFile bounds what is read of the file: maxRates lines of a few
// hundred bytes each.
const maxRateFile = 256 << 10

// maxRateField bounds an upstream's or a model's name in the file.
const maxRateField = 512

// rateEntry is one learned rate in the file.
type rateEntry struct {
	Upstream string `json:"upstream"`
	Model    string `json:"model"`
	// Rate is in tokens per rateScale bytes, in (0, rateScale].
	Rate int64     `json:"tokensPerMillionBytes"`
	At   time.Time `json:"raisedAt"`
}

// rateFile is the file's whole content.
type rateFile struct {
	Version int         `json:"version"`
	Rates   []rateEntry `json:"rates"`
}

// keepLoopbackRates keeps a loopback upstream's rate too (the tests of the
// file, whose fake provider is on loopback).
var keepLoopbackRates bool

// saveMu serialises the file's rewrites within the process.
var saveMu sync.Mutex

// rateUpstream is an upstream as a rate is keyed by: its scheme, host and
// path, without credentials, query or a trailing slash.
func rateUpstream(upstream string) string {
	u, err := url.Parse(upstream)
	if err != nil || u.Host == "" {
		return "unparsed:" + shortHash(upstream)
	}
	key := u.Scheme + "://" + strings.ToLower(u.Host)
	// A path is kept as a hash: some proxies carry an account or a token
	// in it, and the file is kept for good.
	if p := strings.TrimSuffix(u.EscapedPath(), "/"); p != "" {
		key += "/#" + shortHash(p)
	}
	return key
}

// shortHash is a short, stable stand-in for s.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

// persisted reports whether k's rate is kept in the file.
func persisted(k rateKey) bool {
	if len(k.upstream) > maxRateField || len(k.model) > maxRateField || ratesPath() == "" {
		return false
	}
	u, err := url.Parse(k.upstream)
	if err != nil {
		return false
	}
	if keepLoopbackRates {
		return true
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}

// ratesPath is the file's path ("" when there is no state directory).
func ratesPath() string {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "purser", rateFileName)
	}
	if h, err := os.UserHomeDir(); err == nil && filepath.IsAbs(h) {
		return filepath.Join(h, ".local", "state", "purser", rateFileName)
	}
	return ""
}

// loadRatesLocked reads the file into rates, once per process; rates.mu
// is held.
func loadRatesLocked() {
	if rates.loaded {
		return
	}
	rates.loaded = true
	for _, e := range readRates(ratesPath()) {
		k := rateKey{e.Upstream, e.Model}
		if persisted(k) && e.Rate > rates.m[k] {
			rates.m[k], rates.at[k] = e.Rate, e.At
		}
	}
}

// readRates is the file's valid rates (none when it is missing or not a
// rate file; an entry out of bounds is left out).
func readRates(path string) []rateEntry {
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > maxRateFile {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(f, maxRateFile+1))
	var rf rateFile
	if err != nil || len(b) > maxRateFile || json.Unmarshal(b, &rf) != nil || rf.Version != 1 {
		return nil
	}
	out := rf.Rates[:0]
	for _, e := range rf.Rates {
		if e.Rate > 0 && e.Rate <= rateScale && e.Model != "" && e.Upstream != "" &&
			len(e.Model) <= maxRateField && len(e.Upstream) <= maxRateField {
			out = append(out, e)
		}
	}
	return out
}

// saveRate writes k's new rate r to the file, merged with what it holds.
// A write that fails is let go: the rate still serves this process.
func saveRate(k rateKey, r int64) {
	path := ratesPath()
	if path == "" {
		return
	}
	saveMu.Lock()
	defer saveMu.Unlock()
	merged := map[rateKey]rateEntry{}
	for _, e := range readRates(path) {
		ek := rateKey{e.Upstream, e.Model}
		if old, ok := merged[ek]; !ok || e.Rate > old.Rate {
			merged[ek] = e
		}
	}
	if old, ok := merged[k]; !ok || r > old.Rate {
		merged[k] = rateEntry{Upstream: k.upstream, Model: k.model, Rate: r, At: time.Now().UTC()}
	}
	rf := rateFile{Version: 1, Rates: make([]rateEntry, 0, len(merged))}
	for _, e := range merged {
		rf.Rates = append(rf.Rates, e)
	}
	sort.Slice(rf.Rates, func(i, j int) bool {
		a, b := rf.Rates[i], rf.Rates[j]
		if !a.At.Equal(b.At) {
			return a.At.After(b.At)
		}
		return a.Upstream+"\x00"+a.Model < b.Upstream+"\x00"+b.Model
	})
	if len(rf.Rates) > maxRates {
		rf.Rates = rf.Rates[:maxRates]
	}
	b, err := json.MarshalIndent(rf, "", " ")
	if err != nil {
		return
	}
	_ = writeAtomic(path, append(b, '\n'))
}

// writeAtomic replaces path with b: a reader sees the old file or the new
// one whole, never a part.
func writeAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), rateFileName+".*.tmp")
	if err != nil {
		return err
	}
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
	return err
}
