//go:build !linux

package app

// networkFilesystem is not detected off Linux: the documentation says a
// SQLite queue serves workers on one machine.
func networkFilesystem(string) (string, bool) { return "", false }
