package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/purser-dev/purser/backend"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/pricing"
)

// ParseEvents reads usage events as JSON Lines, one event per line (blank
// lines are skipped). Unknown fields are refused by name; every error names
// the line.
func ParseEvents(name string, r io.Reader, prices *pricing.Catalogue) ([]budget.UsageEvent, error) {
	var events []budget.UsageEvent
	err := EachEvent(name, r, prices, func(ev budget.UsageEvent) error {
		events = append(events, ev)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return events, nil
}

// EachEvent reads events as ParseEvents does, one line at a time, and gives
// each to fn as it is read: memory stays flat however long the file. It
// stops at the first bad line (an *Error naming it) or fn's first error.
func EachEvent(name string, r io.Reader, prices *pricing.Catalogue, fn func(budget.UsageEvent) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), backend.MaxEventLine)
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if line == 1 {
			b = bytes.TrimPrefix(b, utf8BOM)
		}
		b = bytes.TrimSpace(b)
		if len(b) == 0 {
			continue
		}
		ev, err := backend.ParseEventLine(b, prices)
		if err != nil {
			return &Error{File: name, Line: line, Msg: err.Error(), Err: err}
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return &Error{File: name, Line: line + 1, Msg: fmt.Sprintf("line longer than %d bytes: not a usage event", backend.MaxEventLine), Err: err}
		}
		return fmt.Errorf("read %s: %w", name, err)
	}
	return nil
}
