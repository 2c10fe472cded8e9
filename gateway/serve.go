package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/meter"
	"github.com/purser-dev/purser/budget"
)

// route is what the door makes of a request's method and path.
type route struct {
	protocol string // the protocol the route belongs to
	api      string // meter.API* for a model request; "" for a pass-through route
	model    string // the model the path names (Gemini)
	stream   bool   // the path asks for a stream (Gemini)
	subAgent string // the sub-agent that sent the request ("" the main agent)
	used     func(budget.UsageEvent)
	// codex is the Codex thread that sent the request (codexsub.go).
	codex codexThread
}

var (
	geminiCall  = regexp.MustCompile(`/models/([^/:]+):(generateContent|streamGenerateContent)$`)
	geminiCount = regexp.MustCompile(`/models/[^/:]+:countTokens$`)
	modelList   = regexp.MustCompile(`/models(/[^/:]+)?$`)
)

// routeOf tells a request's route, or "" and the routes known.
func routeOf(r *http.Request) (route, bool) {
	p := r.URL.Path
	if r.Method == http.MethodPost {
		switch {
		case strings.HasSuffix(p, "/messages/count_tokens"):
			return route{protocol: Anthropic}, true
		case strings.HasSuffix(p, "/messages"):
			return route{protocol: Anthropic, api: meter.APIAnthropic}, true
		case strings.HasSuffix(p, "/chat/completions"):
			return route{protocol: OpenAIChat, api: meter.APIChat}, true
		case strings.HasSuffix(p, "/responses"):
			return route{protocol: OpenAIResponses, api: meter.APIResponses, codex: codexThreadOf(r.Header)}, true
		case geminiCount.MatchString(p):
			return route{protocol: Gemini}, true
		}
		if m := geminiCall.FindStringSubmatch(p); m != nil {
			return route{protocol: Gemini, api: meter.APIGemini, model: m[1], stream: m[2] == "streamGenerateContent"}, true
		}
	}
	if r.Method == http.MethodGet && modelList.MatchString(p) {
		return route{}, true // a model listing: read-only, passed to any lane
	}
	return route{}, false
}

// knownRoutes names the routes for a refusal's message.
const knownRoutes = "POST /v1/messages, /v1/messages/count_tokens, /v1/chat/completions, /v1/responses, " +
	"/v1beta/models/M:generateContent, :streamGenerateContent, :countTokens; GET …/models"

// accepts reports whether a lane of protocol p passes a route of protocol q.
func accepts(p, q string) bool {
	family := func(s string) string {
		if strings.HasPrefix(s, "openai") {
			return "openai"
		}
		return s
	}
	return q == "" || family(p) == family(q)
}

// ServeHTTP is the door: it checks the request (checkRequest), has the
// budget admit it and applies the grant (grant), and forwards it.
func (l *Lane) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt, body, ok := l.checkRequest(w, r)
	if !ok {
		return
	}
	g := grantedRequest{body: body, path: r.URL.Path, release: func() {}}
	if rt.api != "" {
		if g, ok = l.grant(w, &rt, body, r.URL.Path); !ok {
			return
		}
	}
	l.forward(w, r, rt, g)
}

// checkRequest checks who asks and what (loopback, a known route of the
// lane's protocol, the call's token, a call still running) and reads the
// body, bounded. It answers the request itself, and reports false, when
// it is not to be forwarded.
func (l *Lane) checkRequest(w http.ResponseWriter, r *http.Request) (route, []byte, bool) {
	if !loopbackHost(r.Host) {
		l.deny(w, http.StatusMisdirectedRequest, "purser: the door answers loopback names only, not Host "+strconv.Quote(r.Host))
		return route{}, nil, false
	}
	if (r.Method == http.MethodHead || r.Method == http.MethodGet) && r.URL.Path == "/" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK) // Claude Code's connectivity check
		if r.Method == http.MethodGet {
			_, _ = io.WriteString(w, `{"purser":"door"}`)
		}
		return route{}, nil, false
	}
	rt, ok := routeOf(r)
	if !ok {
		l.deny(w, http.StatusNotFound, fmt.Sprintf("purser: the door does not pass %s %s (it passes %s)", r.Method, r.URL.Path, knownRoutes))
		return route{}, nil, false
	}
	if !accepts(l.cfg.Protocol, rt.protocol) {
		l.deny(w, http.StatusNotFound, fmt.Sprintf("purser: this door speaks %s; %s %s is %s", l.cfg.Protocol, r.Method, r.URL.Path, rt.protocol))
		return route{}, nil, false
	}
	if l.token != "" && !l.sameToken(presentedKey(r)) {
		l.deny(w, http.StatusUnauthorized, "purser: the door wants this call's token as the API key (a token dies when its task's call ends)")
		return route{}, nil, false
	}
	if err := l.ctx.Err(); err != nil {
		l.refuse(w, context.Cause(l.ctx))
		return route{}, nil, false
	}
	var body []byte
	if r.Body != nil {
		var err error
		body, err = io.ReadAll(io.LimitReader(r.Body, maxRequest+1))
		if err != nil {
			return route{}, nil, false // the agent hung up
		}
		if len(body) > maxRequest {
			l.deny(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("purser: a request body over %d bytes is not passed", maxRequest))
			return route{}, nil, false
		}
	}
	return rt, body, true
}

// grantedRequest is a request as the budget admitted it: its body and path
// rewritten by the grant, its counted input, and what ends its hold and
// its wrap-up turn.
type grantedRequest struct {
	body     []byte
	path     string
	input    int64
	release  func()
	wrapDone func(string)
	// counted is the request as the door counted it: its bytes and model,
	// which its reply's billed input teaches the door's rate (learnRate).
	counted struct {
		bytes    int
		model    string
		stateful bool // request.stateful: not learnt from
	}
}

// grant has the budget admit a model request, and rewrites it by the
// grant: the model, the output bound, the budget note, the wrap-up turn.
// It answers the request itself, and reports false, when it is refused.
func (l *Lane) grant(w http.ResponseWriter, rt *route, body []byte, path string) (grantedRequest, bool) {
	var release func()
	var wrapDone func(string)
	req := readRequest(*rt, body, l.cfg.Upstream)
	input, counted, countedModel := req.input, len(body), req.model
	var grant purser.WireGrant
	sub, subName := l.subAgentOf(*rt, body)
	rt.subAgent = subName
	if l.cfg.Admit != nil {
		var err error
		grant, err = l.cfg.Admit.AdmitWire(l.ctx, purser.WireRequest{Protocol: rt.protocol, Model: req.model,
			InputTokens: req.input, MaxOutputTokens: req.maxOut, Stream: req.stream, SubAgent: sub, SubAgentName: subName})
		if err != nil {
			l.refuse(w, err)
			return grantedRequest{}, false
		}
		rt.used = grant.Used
		release = once(grant.Release)
		if grant.WrapUp != "" {
			wrapDone = onceText(grant.WrapUpDone)
		}
	}
	// A wrap-up turn that does not reach the provider ends with no text.
	refused := func() {
		if release != nil {
			release()
		}
		if wrapDone != nil {
			wrapDone("")
		}
	}
	if err := l.clampToCallCap(&grant); err != nil {
		refused()
		l.refuse(w, err)
		return grantedRequest{}, false
	}
	if grant.Model != "" || grant.MaxOutputTokens > 0 {
		var err error
		if body, path, err = applyGrant(*rt, req, body, path, grant); err != nil {
			refused()
			l.deny(w, http.StatusBadRequest, "purser: "+err.Error())
			return grantedRequest{}, false
		}
		if grant.Model != "" {
			req.model = grant.Model
		}
	}
	if grant.Hint != "" {
		// The note is the model's to read; a body the door cannot add
		// it to goes as it came.
		if b, err := appendHint(rt.api, body, grant.Hint); err == nil {
			body = b
		}
	}
	if wrapDone != nil {
		// A body the door cannot make the wrap-up turn of goes as it
		// came (the budget admitted it as such); the turn has no text.
		if b, err := applyWrapUp(rt.api, body, grant.WrapUp); err == nil {
			body = b
		} else {
			wrapDone("")
			wrapDone = nil
		}
	}
	rt.model = firstOf(req.model, l.cfg.Model)
	l.mu.Lock()
	l.requests++
	l.mu.Unlock()
	if release == nil {
		release = func() {}
	}
	g := grantedRequest{body: body, path: path, input: input, release: release, wrapDone: wrapDone}
	g.counted.bytes, g.counted.model, g.counted.stateful = counted, countedModel, req.stateful
	return g, true
}

// clampToCallCap clamps a grant's output bound to what the call's own
// output cap (LaneConfig.MaxOutputTokens) leaves, or says why the request
// is refused when nothing is left of it.
func (l *Lane) clampToCallCap(grant *purser.WireGrant) error {
	c := l.cfg.MaxOutputTokens
	if c <= 0 {
		return nil
	}
	l.mu.Lock()
	left := c - l.output
	l.mu.Unlock()
	if left <= 0 {
		return fmt.Errorf("the call's output cap of %d tokens is spent", c)
	}
	if grant.MaxOutputTokens == 0 || left < grant.MaxOutputTokens {
		grant.MaxOutputTokens = left
	}
	return nil
}

// loopbackHost reports whether a Host header names this machine's
// loopback: a DNS-rebinding page in a browser sends its own name.
func loopbackHost(h string) bool {
	host, _, err := net.SplitHostPort(h)
	if err != nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	switch strings.ToLower(host) {
	case "127.0.0.1", "localhost", "::1":
		return true
	}
	return false
}

// presentedKey is the key a request carries wherever its protocol puts it.
func presentedKey(r *http.Request) string {
	if k := r.Header.Get("x-api-key"); k != "" {
		return k
	}
	if a := r.Header.Get("Authorization"); a != "" {
		if k, ok := strings.CutPrefix(a, "Bearer "); ok {
			return strings.TrimSpace(k)
		}
	}
	if k := r.Header.Get("x-goog-api-key"); k != "" {
		return k
	}
	return r.URL.Query().Get("key")
}

// refuse answers a request the budget does not admit: in the provider's
// own error shape, with a status no SDK retries.
func (l *Lane) refuse(w http.ResponseWriter, err error) {
	l.deny(w, http.StatusPaymentRequired, RefusalText(err))
}

// RefusalText is what an agent is told of a request refused by the
// budget: "purser: budget exhausted (…)".
func RefusalText(err error) string {
	if err == nil {
		err = errors.New("the call has ended")
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "purser: budget exhausted") || purser.IsSubAgentRefusal(msg) {
		return msg
	}
	msg = strings.TrimPrefix(strings.TrimPrefix(msg, "purser: "), "budget exhausted: ")
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		msg = "the call was stopped: " + msg
	}
	return "purser: budget exhausted (" + msg + ")"
}

// deny answers with status and msg in the lane's provider's error shape.
func (l *Lane) deny(w http.ResponseWriter, status int, msg string) {
	l.mu.Lock()
	l.refused++
	l.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(errorBody(l.cfg.Protocol, status, msg))
}

// forward sends the request upstream with the real key, and the reply
// back through a bounded buffer, its usage booked as it arrives.
// wrapDone, when not nil, receives the reply's text when it ends whole,
// or "" when it does not.
func (l *Lane) forward(w http.ResponseWriter, r *http.Request, rt route, g grantedRequest) {
	path, body, input, release, wrapDone := g.path, g.body, g.input, g.release, g.wrapDone
	if wrapDone != nil {
		rel := release
		release = func() {
			rel()
			wrapDone("") // after the pump's own call, if the reply came whole
		}
	}
	// The upstream request lives with the lane, not the agent's connection:
	// a reply the agent stops reading is still read to its end and booked
	// (the provider bills it); the lane's end cuts it.
	ctx, cancel := context.WithCancel(l.ctx)
	out, err := http.NewRequestWithContext(ctx, r.Method, l.upstreamURL(path, r.URL.RawQuery), bytes.NewReader(body))
	if err != nil {
		cancel()
		release()
		l.deny(w, http.StatusBadGateway, "purser: "+err.Error())
		return
	}
	copyHeaders(out.Header, r.Header)
	l.authorize(out)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		cancel()
		release()
		l.refuse(w, context.Cause(l.ctx))
		return
	}
	l.inflight.Add(1) // under mu: never after Close has begun to wait
	l.mu.Unlock()
	resp, err := l.transport.RoundTrip(out)
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its URL may carry a key in its query: never said
	}
	if err != nil {
		defer l.inflight.Done()
		cancel()
		release()
		if l.ctx.Err() != nil {
			l.refuse(w, context.Cause(l.ctx))
			return
		}
		l.mu.Lock()
		l.lastErr = err
		l.mu.Unlock()
		l.deny(w, http.StatusBadGateway, "purser: the provider could not be reached: "+err.Error())
		return
	}
	l.mu.Lock()
	l.lastErr = nil
	l.mu.Unlock()
	sse := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	var tap *meter.Tap
	if rt.api != "" && resp.StatusCode/100 == 2 {
		tap = meter.NewTap(rt.api, rt.model, sse, l.learnAndBook(g, l.bookFor(rt)))
		resp.Body = l.subs.watch(rt.api, sse, resp.Body)
	}
	var wrap *wrapUpReader
	if wrapDone != nil && resp.StatusCode/100 == 2 {
		wrap = &wrapUpReader{api: rt.api, sse: sse}
	}
	buf := newPipe(l.cfg.BufferBytes)
	cutRoute := rt
	if cutRoute.model == "" {
		cutRoute.model = g.counted.model // a cut reply is booked under the model the request named
	}
	go l.pump(resp.Body, tap, buf, cancel, release, cutRoute, input, wrap, wrapDone)

	copyHeaders(w.Header(), resp.Header)
	w.Header().Del("Content-Length") // the reply passes as it comes
	w.WriteHeader(resp.StatusCode)
	l.relay(w, buf, rt.protocol, sse)
}

// relay hands the reply to the agent from buf as it comes. When the lane
// ends (the hard cap) while it flows, the agent is told why where its
// protocol can say it, and the reply is broken off.
func (l *Lane) relay(w http.ResponseWriter, buf *pipe, protocol string, sse bool) {
	flusher, _ := w.(http.Flusher)
	for {
		chunk, err := buf.read()
		if len(chunk) > 0 {
			if _, werr := w.Write(chunk); werr != nil {
				buf.discard() // the agent hung up: the pump reads on, booking
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) {
			return
		}
		buf.discard()
		if l.ctx.Err() != nil {
			// Cut by the lane's end (the hard cap): the agent is told why
			// where its protocol can say it, and its stream ends now.
			l.mu.Lock()
			l.cut++
			l.mu.Unlock()
			if sse {
				_, _ = w.Write(streamError(protocol, RefusalText(context.Cause(l.ctx))))
				if flusher != nil {
					flusher.Flush()
				}
			}
		}
		panic(http.ErrAbortHandler) // the agent sees the reply broken off, not ended
	}
}

// pump reads the provider's reply as fast as it comes, reading its usage
// and handing it to the agent's side through buf.
func (l *Lane) pump(body io.ReadCloser, tap *meter.Tap, buf *pipe, cancel context.CancelFunc, release func(), rt route, input int64, wrap *wrapUpReader, wrapDone func(string)) {
	defer l.inflight.Done()
	defer release()
	defer cancel()
	defer body.Close()
	read := make([]byte, 32<<10)
	for {
		n, err := body.Read(read)
		if n > 0 {
			l.carried.Add(int64(n))
			if tap != nil {
				_, _ = tap.Write(read[:n])
			}
			if wrap != nil {
				_, _ = wrap.Write(read[:n])
			}
			// The pipe owns what it is given: a copy the size of what came
			// (a stream's events are small; 32 KiB each would be waste).
			buf.write(append([]byte(nil), read[:n]...))
		}
		if err != nil {
			switch {
			case tap == nil:
			case errors.Is(err, io.EOF):
				tap.End()
				if l.ctx.Err() != nil && !tap.Booked() {
					l.bookCut(tap, rt, input)
				} else {
					tap.Cut() // a stream that ended without its usage whole: a drop
				}
			case l.ctx.Err() != nil && !tap.Booked():
				l.bookCut(tap, rt, input)
			default:
				tap.Cut() // the provider's connection broke: a drop
			}
			if wrap != nil && errors.Is(err, io.EOF) {
				wrapDone(wrap.end())
			}
			buf.closeWrite(err)
			return
		}
	}
}

// A reply the provider dropped (its connection broken, or a stream closed
// before its closing event) is booked for what it had said of its usage
// (Tap.Cut), and for nothing more: a provider that dropped a reply before
// it said anything of it has not started billing it, as far as the door
// can know (Codex's, after response.created).

// bookCut books a reply the lane's end cut before its usage was whole: the
// provider bills its input once it started it. Anthropic said it in
// message_start (the tap books it, Cut); the others say nothing before the
// end, so the door's count of the request's input is booked, under the
// request's model, as any reply is: journalled, then reported (Report
// set). Where a CLI's own report is its call's source, the call's
// reconciliation takes per model the larger of the CLI's count and the
// journal's, so a cut reply the CLI never saw is counted once, not $0.
func (l *Lane) bookCut(tap *meter.Tap, rt route, input int64) {
	if tap.Cut() || input <= 0 {
		return
	}
	model := firstOf(rt.model, l.cfg.Model)
	l.mu.Lock()
	l.booked++
	l.mu.Unlock()
	if l.journal != nil {
		l.journal.Record(meter.Counted(rt.api, model, input))
	}
	if l.cfg.Report == nil {
		return
	}
	l.reportMu.Lock()
	defer l.reportMu.Unlock()
	l.cfg.Report(budget.UsageEvent{Model: model, InputTokens: input, Agent: rt.subAgent})
}

// learnAndBook books a reply's usage (by book), first teaching the door's
// count what the provider billed for the request's bytes (learnRate).
func (l *Lane) learnAndBook(g grantedRequest, book func(meter.Usage)) func(meter.Usage) {
	return func(u meter.Usage) {
		if !g.counted.stateful {
			learnRate(l.cfg.Upstream, g.counted.model, g.counted.bytes, u.Event().InputTokens)
		}
		book(u)
	}
}

// book is a reply's usage, whole: journalled, then reported.
func (l *Lane) book(u meter.Usage) { l.bookAs(u, "", nil) }

// bookAs books a reply's usage as agent's ("" the main agent's), handing
// it to used first when not nil.
func (l *Lane) bookAs(u meter.Usage, agent string, used func(budget.UsageEvent)) {
	ev := u.Event()
	if ev.Model == "" {
		ev.Model = l.cfg.Model
	}
	ev.Agent = agent
	if used != nil {
		used(ev)
	}
	if l.journal != nil {
		l.journal.Record(u)
	}
	l.mu.Lock()
	l.booked++
	l.output += ev.OutputTokens
	l.mu.Unlock()
	if l.cfg.Report != nil {
		// One report at a time, outside mu: the engine may stop the call
		// from its UsageFunc, which ends this lane.
		l.reportMu.Lock()
		defer l.reportMu.Unlock()
		l.cfg.Report(ev)
	}
}

// upstreamURL joins the upstream base with a request's path and query: a
// version segment both carry (/v1 in https://api.openai.com/v1 and the
// agent's /v1/responses) appears once.
func (l *Lane) upstreamURL(path, query string) string {
	base := strings.TrimSuffix(l.up.Path, "/")
	for _, v := range []string{"/v1", "/v1beta", "/v1alpha"} {
		if strings.HasSuffix(base, v) && strings.HasPrefix(path, v+"/") {
			path = strings.TrimPrefix(path, v)
			break
		}
	}
	u := *l.up
	u.Path = base + path
	u.RawPath = ""
	if l.key != "" && query != "" {
		q := u.Query()
		for k, vs := range parseQuery(query) {
			if k == "key" {
				continue // the token: the real key goes in a header
			}
			q[k] = vs
		}
		u.RawQuery = q.Encode()
	} else {
		u.RawQuery = query
	}
	return u.String()
}

// authorize puts the real key where the protocol wants it, and the token
// nowhere. A lane holding no key passes the agent's own credentials.
func (l *Lane) authorize(out *http.Request) {
	if l.key == "" {
		return
	}
	l.cfg.Key.put(out.Header, l.cfg.Protocol, l.key)
}

// hopHeaders are the headers that belong to one connection, and those the
// door sets itself.
var hopHeaders = map[string]bool{"Connection": true, "Proxy-Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true,
	"Proxy-Authorization": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Content-Length": true, "Accept-Encoding": true, "Host": true}

func copyHeaders(dst, src http.Header) {
	for k, vs := range src {
		if hopHeaders[http.CanonicalHeaderKey(k)] {
			continue
		}
		dst[k] = append([]string(nil), vs...)
	}
}

// once makes a grant's release safe to call from both the handler and
// the pump, and nil-safe.
func once(f func()) func() {
	var o sync.Once
	return func() {
		if f != nil {
			o.Do(f)
		}
	}
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
