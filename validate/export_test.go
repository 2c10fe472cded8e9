package validate

import "time"

// IdleBoxes lists the pids of the resident runners not running a
// validator: bwrap's of a box, the supervisor's of an unboxed one.
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
