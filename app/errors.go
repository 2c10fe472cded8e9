package app

import "errors"

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
