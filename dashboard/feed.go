package dashboard

import (
	"bytes"
	"context"
	"sync"
	"time"
)

// update is what the feed read from the store: a snapshot, or why not.
type update struct {
	body []byte
	err  error
}

// feed reads the store once per interval for every live page together,
// while at least one is open, and hands each the latest change: ten open
// pages cost one read, not ten.
type feed struct {
	load     func(context.Context) ([]byte, error)
	interval time.Duration

	mu      sync.Mutex
	subs    map[chan update]struct{}
	current *update // the latest, for a page that opens now
	stop    context.CancelFunc
}

func newFeed(load func(context.Context) ([]byte, error), interval time.Duration) *feed {
	return &feed{load: load, interval: interval, subs: map[chan update]struct{}{}}
}

// subscribe returns a channel that receives the latest update (an older one
// not yet taken is replaced), and the function that ends the subscription.
func (f *feed) subscribe() (<-chan update, func()) {
	ch := make(chan update, 1)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subs[ch] = struct{}{}
	if f.current != nil {
		ch <- *f.current
	}
	if f.stop == nil {
		ctx, cancel := context.WithCancel(context.Background())
		f.stop = cancel
		f.current = nil
		go f.poll(ctx)
	}
	return ch, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.subs, ch)
		if len(f.subs) == 0 && f.stop != nil {
			f.stop()
			f.stop = nil
		}
	}
}

func (f *feed) poll(ctx context.Context) {
	tick := time.NewTicker(f.interval)
	defer tick.Stop()
	var last update
	first := true
	for {
		body, err := f.load(ctx)
		u := update{body: body, err: err}
		changed := first || !bytes.Equal(body, last.body) || errText(err) != errText(last.err)
		if changed && ctx.Err() == nil {
			first, last = false, u
			f.publish(ctx, u)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (f *feed) publish(ctx context.Context, u update) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ctx.Err() != nil {
		return // stopped while reading: a newer poll may be running
	}
	f.current = &u
	for ch := range f.subs {
		select {
		case <-ch: // drop the older update nobody took
		default:
		}
		ch <- u // cannot block: only publish sends, under f.mu
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
