package yamlfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// MaxFileBytes is the largest budget, task, project or script file read. A
// real one is a few kilobytes; the bound keeps a hostile repository's file
// (or /dev/zero named as one) from filling memory.
const MaxFileBytes = 4 << 20

// MaxDepth is how deeply a file's collections may nest. Purser's files nest
// a handful of levels; the YAML parser spends minutes on a 64 KB document
// nested thousands deep, so nesting is measured first, by a scan.
const MaxDepth = 64

// maxIndent bounds block-style nesting, measured as indentation: MaxDepth
// levels at four columns each.
const maxIndent = 4 * MaxDepth

// UTF8BOM is the byte order mark some editors put at the start of a file.
var UTF8BOM = []byte("\ufeff")

// ReadFile reads a whole file of at most MaxFileBytes, naming it in the
// error.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, errors.Unwrap(err))
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return nil, &Error{File: path, Msg: "is a directory: give a file (YAML or JSON)"}
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, errors.Unwrap(err))
	}
	if len(data) > MaxFileBytes {
		return nil, &Error{File: path, Msg: fmt.Sprintf("file is larger than %d bytes: not a Purser file", MaxFileBytes)}
	}
	return data, nil
}

// checkNesting refuses, before any parsing, a document whose flow
// collections ([ ] { }) nest deeper than MaxDepth or whose lines are
// indented (block nesting) more than maxIndent columns, naming the line.
// Quoted scalars and comments are skipped (a quote opens one only where a
// scalar can start, so an apostrophe in plain text does not); brackets in a
// block scalar count, which can only over-refuse a file no budget or task
// has.
func checkNesting(name string, data []byte) error {
	depth, line, col, indent := 0, 1, 0, 0
	atIndent := true
	var quote, prev byte // prev: the last non-blank byte of the line, 0 at its start
	for i := 0; i < len(data); i++ {
		c := data[i]
		if c == '\n' {
			line, col, indent, atIndent, prev = line+1, 0, 0, true, 0
			continue
		}
		col++
		switch {
		case quote == '"':
			if c == '\\' {
				i++
			} else if c == '"' {
				quote = 0
			}
			continue
		case quote == '\'':
			if c == '\'' {
				quote = 0
			}
			continue
		}
		if c == ' ' {
			if atIndent {
				if indent++; indent > maxIndent {
					return &Error{File: name, Line: line, Msg: fmt.Sprintf("nested too deeply: indented more than %d columns", maxIndent)}
				}
			}
			continue
		}
		atIndent = false
		switch c {
		case '\t':
			continue
		case '"', '\'':
			if prev == 0 || bytes.IndexByte([]byte(":-,[{?"), prev) >= 0 {
				quote = c
			}
		case '#':
			if col == 1 || data[i-1] == ' ' || data[i-1] == '\t' {
				j := bytes.IndexByte(data[i:], '\n')
				if j < 0 {
					return nil
				}
				i += j - 1
				continue
			}
		case '[', '{':
			if depth++; depth > MaxDepth {
				return &Error{File: name, Line: line, Column: col, Msg: fmt.Sprintf("nested too deeply: more than %d levels of [ ] or { }", MaxDepth)}
			}
		case ']', '}':
			depth = max(depth-1, 0)
		}
		prev = c
	}
	return nil
}
