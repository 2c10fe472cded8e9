package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// Doer sends an HTTP request (an *http.Client does).
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

func defaultClient() *http.Client {
	return &http.Client{
		// A redirect could take the payload somewhere the user did not name.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Payload is the JSON a FormatJSON webhook receives.
type Payload struct {
	ID     string         `json:"id"`
	Event  Kind           `json:"event"`
	Scope  string         `json:"scope"` // "task" or "run"
	Task   string         `json:"task"`
	Time   time.Time      `json:"time"`
	Tier   budget.Tier    `json:"tier"`
	Metric string         `json:"metric"` // the metric that put the budget in its tier
	Text   string         `json:"text"`
	Budget budget.Status  `json:"budget"`
	Run    *budget.Status `json:"runBudget,omitempty"`
	// Ask is what a raise would likely take to let a BLOCKED task finish,
	// and the command that makes it (Alert.Ask); omitted when none.
	Ask string `json:"ask,omitempty"`
}

// slackPayload is what Slack-compatible incoming webhooks take.
type slackPayload struct {
	Text string `json:"text"`
}

// Body is the request body a webhook of format f receives for a.
func Body(f Format, a Alert) ([]byte, error) {
	if f == FormatSlack {
		return json.Marshal(slackPayload{Text: a.Text()})
	}
	return json.Marshal(Payload{ID: a.ID, Event: a.Kind, Scope: a.Scope.String(), Task: a.TaskID, Time: a.Time,
		Tier: a.Status.Tier, Metric: a.Metric.String(), Text: a.Text(), Budget: a.Status, Run: a.Run, Ask: a.Ask()})
}

// delivery is one alert for one webhook: its request body, made (and
// recorded in the outbox) when the alert was queued.
type delivery struct {
	id, kind, taskID string
	body             []byte
}

// sink is one webhook's queue and the goroutine that delivers from it.
type sink struct {
	hook   Webhook
	cfg    Config
	client Doer
	logf   func(string, ...any)
	outbox purser.AlertOutbox // nil: alerts live in memory only
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{}
	done   chan struct{}

	mu          sync.Mutex
	queue       []delivery
	closing     bool
	delivered   int
	undelivered int
}

func startSink(w Webhook, cfg Config, client Doer, logf func(string, ...any), outbox purser.AlertOutbox) *sink {
	ctx, cancel := context.WithCancel(context.Background())
	s := &sink{hook: w, cfg: cfg, client: client, logf: logf, outbox: outbox, ctx: ctx, cancel: cancel,
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	go s.run()
	return s
}

// push queues deliveries; it never blocks.
func (s *sink) push(d ...delivery) {
	s.mu.Lock()
	s.queue = append(s.queue, d...)
	s.mu.Unlock()
	s.signal()
}

func (s *sink) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// close asks the goroutine to end once the queue is empty.
func (s *sink) close() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.signal()
}

func (s *sink) counts() (delivered, undelivered int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.delivered, s.undelivered + len(s.queue)
}

// record writes to the outbox, if there is one. It runs on a context of its
// own: what the end of the flush abandons must still be released.
func (s *sink) record(what string, write func(ctx context.Context, o purser.AlertOutbox) error) {
	if s.outbox == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), outboxTimeout)
	defer cancel()
	if err := write(ctx, s.outbox); err != nil {
		s.logf("alert outbox: %s: %v", what, err)
	}
}

// outboxTimeout bounds one write to the outbox.
const outboxTimeout = 10 * time.Second

func (s *sink) run() {
	defer close(s.done)
	defer s.release()
	for {
		s.mu.Lock()
		for len(s.queue) == 0 && !s.closing {
			s.mu.Unlock()
			select {
			case <-s.wake:
			case <-s.ctx.Done():
				return
			}
			s.mu.Lock()
		}
		if len(s.queue) == 0 {
			s.mu.Unlock()
			return
		}
		d := s.queue[0]
		s.mu.Unlock()

		err := s.deliver(d)
		state := purser.OutboxDelivered
		switch {
		case errors.Is(err, errPermanent):
			state = purser.OutboxRefused
		case err != nil:
			state = purser.OutboxPending // tried again at the next start
		}
		s.record("settle alert "+d.id, func(ctx context.Context, o purser.AlertOutbox) error {
			return o.SettleAlert(ctx, d.id, s.hook.Name, state)
		})
		s.mu.Lock()
		s.queue = s.queue[1:]
		if err == nil {
			s.delivered++
		} else {
			s.undelivered++
		}
		s.mu.Unlock()
		if err != nil {
			s.logf("alert %s (%s, task %s) to webhook %s not delivered: %v", d.id, d.kind, d.taskID, s.hook.Name, err)
		}
		if s.ctx.Err() != nil {
			return
		}
	}
}

// release lets go of the alerts the flush left queued, so that the next
// start takes them at once.
func (s *sink) release() {
	s.mu.Lock()
	left := s.queue
	s.mu.Unlock()
	for _, d := range left {
		s.record("release alert "+d.id, func(ctx context.Context, o purser.AlertOutbox) error {
			return o.SettleAlert(ctx, d.id, s.hook.Name, purser.OutboxPending)
		})
	}
}

// errPermanent marks a refusal that another attempt would not change.
var errPermanent = errors.New("refused")

// deliver sends one alert, retrying with back-off until it is accepted, it
// is refused for good, the attempts run out or the sink is cancelled.
func (s *sink) deliver(d delivery) error {
	wait := s.cfg.Backoff
	var last error
	for attempt := 1; attempt <= s.cfg.MaxAttempts; attempt++ {
		s.record("count an attempt of alert "+d.id, func(ctx context.Context, o purser.AlertOutbox) error {
			return o.AlertAttempted(ctx, d.id, s.hook.Name)
		})
		retryAfter, err := s.attempt(d)
		if err == nil {
			return nil
		}
		last = fmt.Errorf("attempt %d of %d: %w", attempt, s.cfg.MaxAttempts, err)
		if errors.Is(err, errPermanent) || attempt == s.cfg.MaxAttempts {
			break
		}
		pause := max(wait, min(retryAfter, s.cfg.MaxBackoff))
		timer := time.NewTimer(pause)
		select {
		case <-timer.C:
		case <-s.ctx.Done():
			timer.Stop()
			return fmt.Errorf("%w; abandoned at the end of the run's flush", last)
		}
		wait = min(2*wait, s.cfg.MaxBackoff)
	}
	return last
}

// attempt makes one request. It returns how long the receiver asked to be
// left alone (Retry-After), if it did.
func (s *sink) attempt(d delivery) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.hook.URL, bytes.NewReader(d.body))
	if err != nil {
		return 0, fmt.Errorf("%w: bad URL: %v", errPermanent, hideURL(err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "purser-alert")
	req.Header.Set("Idempotency-Key", d.id)
	req.Header.Set("X-Purser-Event", d.kind)
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, hideURL(err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return 0, nil
	case code == http.StatusTooManyRequests || code == http.StatusRequestTimeout || code >= 500:
		secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return time.Duration(max(secs, 0)) * time.Second, fmt.Errorf("receiver answered %s", resp.Status)
	default:
		return 0, fmt.Errorf("%w: receiver answered %s", errPermanent, resp.Status)
	}
}

// hideURL drops the URL from a transport error: a webhook's URL (Slack's,
// for one) is a secret, and must not reach the terminal or a log.
func hideURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}
