package gateway

// KeepLoopbackRates has the door keep a loopback upstream's learned rate
// in its file, as it keeps a remote provider's: the tests' fake provider
// listens on loopback.
func KeepLoopbackRates() { keepLoopbackRates = true }
