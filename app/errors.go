package app

import (
	"errors"
	"fmt"
)

// InputError marks an error as the input's fault: a file, flag or argument
// is wrong, and nothing was run or spent. The command line turns it into
// exit code 2; its message is the wrapped error's, unchanged.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// BadInput marks err as the input's fault (nil stays nil).
func BadInput(err error) error {
	if err == nil {
		return nil
	}
	return &InputError{Err: err}
}

// IsBadInput says whether err, or one it wraps, is the input's fault.
func IsBadInput(err error) bool {
	var ie *InputError
	return errors.As(err, &ie)
}

// NoDatabaseError is Open's error for a database that does not exist,
// opened by a command that does not create one: a reading command, or a
// worker (Queue), which must not serve a new, empty queue and look healthy.
type NoDatabaseError struct {
	DB    Database
	Queue string // the queue command refused, "" for a reading command
}

func (e *NoDatabaseError) Error() string {
	if e.Queue != "" {
		return fmt.Sprintf("%s: no database at %s, so no queue to take jobs from: queue tasks with purser submit first, or give the fleet's database (--db or PURSER_DB)", e.Queue, e.DB)
	}
	return fmt.Sprintf("no database at %s: nothing has run here yet (give --db or PURSER_DB to read another)", e.DB)
}
