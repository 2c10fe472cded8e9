//go:build !race

package boxinit

// raceBuild is true in a binary built with the race detector (see
// race_on.go).
const raceBuild = false
