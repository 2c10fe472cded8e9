package budget

import (
	"math/big"
	"sort"
)

// Apportion divides total (≥ 0) in proportion to weights, in whole units,
// the parts summing to total exactly: each part is its proportional share
// rounded down, and the units left go one each to the largest remainders
// (the first in order on a tie). All weights zero gives all to the first;
// no weights gives no parts. Money split among those who spent it (a
// reported total among the agents of one call) must add up to the
// nano-dollar, which rounding each share on its own does not.
func Apportion(total int64, weights []*big.Rat) []int64 {
	parts := make([]int64, len(weights))
	if len(weights) == 0 {
		return parts
	}
	sum := new(big.Rat)
	for _, w := range weights {
		sum.Add(sum, w)
	}
	if sum.Sign() == 0 {
		parts[0] = total
		return parts
	}
	rems := make([]*big.Rat, len(weights))
	left := total
	for i, w := range weights {
		share := new(big.Rat).Mul(big.NewRat(total, 1), w)
		share.Quo(share, sum)
		q := new(big.Int).Quo(share.Num(), share.Denom()) // shares are ≥ 0: Quo floors
		parts[i] = q.Int64()
		left -= parts[i]
		rems[i] = share.Sub(share, new(big.Rat).SetInt(q))
	}
	order := make([]int, len(weights))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return rems[order[a]].Cmp(rems[order[b]]) > 0 })
	for i := 0; left > 0; i = (i + 1) % len(order) {
		parts[order[i]]++
		left--
	}
	return parts
}
