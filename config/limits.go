package config

import "github.com/purser-dev/purser/internal/yamlfile"

// MaxFileBytes is the largest budget, task, project or script file read. A
// real one is a few kilobytes; the bound keeps a hostile repository's file
// (or /dev/zero named as one) from filling memory.
const MaxFileBytes = yamlfile.MaxFileBytes

// MaxDepth is how deeply a file's collections may nest: see
// yamlfile.MaxDepth.
const MaxDepth = yamlfile.MaxDepth

// utf8BOM is the byte order mark some editors put at the start of a file.
var utf8BOM = yamlfile.UTF8BOM

// readFile reads a whole file of at most MaxFileBytes, naming it in the
// error.
func readFile(path string) ([]byte, error) { return yamlfile.ReadFile(path) }
