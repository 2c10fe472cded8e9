package meter

// Quieted is how many transport lines were kept off the standard logger.
func Quieted() int64 { return quieted.Load() }
