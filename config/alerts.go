package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/purser-dev/purser"
)

// alertsFile is the written form of purser.yaml's alerts: section.
type alertsFile struct {
	// Flush is how long the end of a run waits for alerts not yet delivered.
	Flush       string        `yaml:"flush"`
	Timeout     string        `yaml:"timeout"`
	MaxAttempts *int          `yaml:"maxAttempts"`
	Backoff     string        `yaml:"backoff"`
	Webhooks    []webhookFile `yaml:"webhooks"`
}

type webhookFile struct {
	Name string `yaml:"name"`
	URL  string `yaml:"url"`
	// URLEnv names the environment variable holding the URL: a Slack
	// webhook's URL is a secret, better kept out of the file.
	URLEnv string   `yaml:"urlEnv"`
	Format string   `yaml:"format"`
	Events []string `yaml:"events"`
}

// Alerts is purser.yaml's alerts: section, checked. Webhooks given by
// urlEnv are resolved by Config, when a run starts.
type Alerts struct {
	cfg    purser.AlertConfig
	urlEnv map[int]string // webhook index → the variable holding its URL
	doc    *document
}

// Enabled reports whether any webhook is configured.
func (a *Alerts) Enabled() bool { return a != nil && len(a.cfg.Webhooks) > 0 }

// Config is the notifier's configuration, with every urlEnv read from the
// environment now; an unset or invalid one is an error located in
// purser.yaml (its value is never printed).
func (a *Alerts) Config() (purser.AlertConfig, error) {
	if a == nil {
		return purser.AlertConfig{}, nil
	}
	cfg := a.cfg
	cfg.Webhooks = slices.Clone(a.cfg.Webhooks)
	for i, name := range a.urlEnv {
		field := fmt.Sprintf("alerts.webhooks[%d].urlEnv", i)
		v := os.Getenv(name)
		if v == "" {
			return purser.AlertConfig{}, a.doc.at(field, fmt.Sprintf("$%s is not set: it should hold the webhook's URL", name), nil)
		}
		if msg := webhookURLProblem(v); msg != "" {
			return purser.AlertConfig{}, a.doc.at(field, fmt.Sprintf("$%s %s", name, msg), nil)
		}
		cfg.Webhooks[i].URL = v
	}
	return cfg, nil
}

// webhookURLProblem says what is wrong with a webhook URL, without
// repeating it (it may hold a secret).
func webhookURLProblem(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "is not an http:// or https:// URL"
	}
	return ""
}

// alerts checks the alerts: section.
func (d *document) alerts(f *alertsFile) (*Alerts, error) {
	a := &Alerts{urlEnv: map[int]string{}, doc: d}
	var errs []error
	fail := func(field, msg string) { errs = append(errs, d.at("alerts."+field, msg, nil)) }
	duration := func(field, s string, into *time.Duration) {
		if s == "" {
			return
		}
		v, err := time.ParseDuration(s)
		if err != nil || v <= 0 {
			fail(field, fmt.Sprintf("%q: want a duration such as 500ms, 5s or 1m", s))
			return
		}
		*into = v
	}
	duration("flush", f.Flush, &a.cfg.Flush)
	duration("timeout", f.Timeout, &a.cfg.Timeout)
	duration("backoff", f.Backoff, &a.cfg.Backoff)
	if f.MaxAttempts != nil {
		if *f.MaxAttempts < 1 || *f.MaxAttempts > 100 {
			fail("maxAttempts", fmt.Sprintf("want 1 to 100, got %d", *f.MaxAttempts))
		}
		a.cfg.MaxAttempts = *f.MaxAttempts
	}
	names := map[string]bool{}
	for i, w := range f.Webhooks {
		field := fmt.Sprintf("webhooks[%d]", i)
		hook := purser.AlertWebhook{Name: w.Name, URL: w.URL, Format: purser.AlertFormatJSON}
		if hook.Name == "" {
			hook.Name = fmt.Sprintf("webhooks[%d]", i)
		} else if names[hook.Name] {
			fail(field+".name", fmt.Sprintf("%q is used twice", hook.Name))
		}
		names[hook.Name] = true
		switch {
		case w.URL != "" && w.URLEnv != "":
			fail(field+".url", "give url or urlEnv, not both")
		case w.URL == "" && w.URLEnv == "":
			fail(field+".url", "is required (or urlEnv: the environment variable holding it)")
		case w.URL != "":
			if msg := webhookURLProblem(w.URL); msg != "" {
				fail(field+".url", msg)
			}
		default:
			a.urlEnv[i] = w.URLEnv
		}
		switch w.Format {
		case "", "json":
		case "slack":
			hook.Format = purser.AlertFormatSlack
		default:
			fail(field+".format", fmt.Sprintf("%q: want json (Purser's payload) or slack ({\"text\": …})", w.Format))
		}
		for j, e := range w.Events {
			if !slices.Contains(purser.AlertKinds, purser.AlertKind(e)) {
				known := make([]string, len(purser.AlertKinds))
				for k, kind := range purser.AlertKinds {
					known[k] = string(kind)
				}
				fail(fmt.Sprintf("%s.events[%d]", field, j), fmt.Sprintf("%q: want one of %s", e, strings.Join(known, ", ")))
				continue
			}
			hook.Events = append(hook.Events, purser.AlertKind(e))
		}
		a.cfg.Webhooks = append(a.cfg.Webhooks, hook)
	}
	if len(errs) > 0 {
		return nil, errors.Join(sortErrors(errs)...)
	}
	return a, nil
}
