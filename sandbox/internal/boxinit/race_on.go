//go:build race

package boxinit

// raceBuild is true in a binary built with the race detector, whose
// runtime maps terabytes of shadow memory: an init under RLIMIT_DATA could
// not run, so it bounds its command's memory after starting it instead.
const raceBuild = true
