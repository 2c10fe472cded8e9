package sandbox

import (
	"maps"
	"sync"
)

// EgressCount is what the boxes' egress proxies of this process did for one
// destination: connections let through and refused, and the bytes the
// allowed ones carried each way (up: from the box).
type EgressCount struct {
	Allowed, Refused   int64
	BytesUp, BytesDown int64
}

// egressOther is where destinations beyond maxEgressDestinations are
// counted: an agent that asks for a million names must not grow Purser's
// memory by a million entries.
const (
	egressOther           = "(other destinations)"
	maxEgressDestinations = 1024
)

var egressCounts struct {
	sync.Mutex
	m map[string]EgressCount
}

// EgressCounts returns, per destination (host:port as the box asked for
// it), what the egress proxies of this process have let through and
// refused since it started: for a call's note, purser check or a test.
func EgressCounts() map[string]EgressCount {
	egressCounts.Lock()
	defer egressCounts.Unlock()
	return maps.Clone(egressCounts.m)
}

// countEgress applies f to dest's count.
func countEgress(dest string, f func(*EgressCount)) {
	egressCounts.Lock()
	defer egressCounts.Unlock()
	if egressCounts.m == nil {
		egressCounts.m = map[string]EgressCount{}
	}
	if _, ok := egressCounts.m[dest]; !ok && len(egressCounts.m) >= maxEgressDestinations {
		dest = egressOther
	}
	c := egressCounts.m[dest]
	f(&c)
	egressCounts.m[dest] = c
}

func countAllowed(dest string, up, down int64) {
	countEgress(dest, func(c *EgressCount) { c.Allowed++; c.BytesUp += up; c.BytesDown += down })
}

func countRefused(dest string) {
	countEgress(dest, func(c *EgressCount) { c.Refused++ })
}
