package validate

import "time"

// IdleBoxes lists the bwrap pids of the resident boxes not running a
// validator.
func IdleBoxes() []int {
	boxes.mu.Lock()
	defer boxes.mu.Unlock()
	var pids []int
	for _, rs := range boxes.idle {
		for _, rn := range rs {
			pids = append(pids, rn.pid())
		}
	}
	return pids
}

// SetIdleTimeout sets how long a resident box may stay idle, until the
// returned function restores it.
func SetIdleTimeout(d time.Duration) (restore func()) {
	old := idleTimeout
	idleTimeout = d
	return func() { idleTimeout = old }
}
