// Package yamlfile reads Purser's YAML (and JSON) files strictly: bounded in
// size and nesting, unknown keys refused by name, every error carrying the
// file, line and field. config reads budgets, tasks and projects with it;
// the sim backend its scripts, without linking the config loader.
package yamlfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// Error is a problem in a file: where it is and what is wrong.
type Error struct {
	File   string
	Line   int // 1-based; 0 when unknown
	Column int
	Field  string // dotted path, e.g. "hard.usd"; empty when not about one field
	Msg    string
	Err    error // the underlying error, if any
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Column > 0 {
			fmt.Fprintf(&b, ":%d", e.Column)
		}
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Document is a parsed YAML (or JSON) file, kept to locate fields by path.
type Document struct {
	name string
	data []byte
	file *ast.File
}

// AST is the parsed file, for checks that walk its nodes (anchors, aliases,
// merge keys).
func (d *Document) AST() *ast.File { return d.file }

// Parse reads data as YAML. JSON is YAML, so both are accepted. name
// labels errors.
func Parse(name string, data []byte) (*Document, error) {
	// A byte order mark is not part of the first key (nor visible in an
	// error about it).
	data = bytes.TrimPrefix(data, UTF8BOM)
	if len(data) > MaxFileBytes {
		return nil, &Error{File: name, Msg: fmt.Sprintf("file is larger than %d bytes: not a Purser file", MaxFileBytes)}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &Error{File: name, Msg: "file is empty"}
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return nil, &Error{File: name, Msg: "file is binary (contains a NUL byte), want YAML or JSON"}
	}
	if err := checkNesting(name, data); err != nil {
		return nil, err
	}
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, yamlError(name, err)
	}
	return &Document{name: name, data: data, file: f}, nil
}

// Decode decodes the document strictly into v: a key no field of v names
// is refused, with the key most likely meant.
func (d *Document) Decode(v any) (err error) {
	// The YAML library can panic on input it parsed (a custom tag on a
	// sequence, found by FuzzLoadScript): that is bad input, said as such,
	// never a crash.
	defer func() {
		if r := recover(); r != nil {
			err = &Error{File: d.name, Msg: fmt.Sprintf("cannot read this YAML (the decoder failed on it: %v); check tags (!…) and structure", r)}
		}
	}()
	if err := yaml.UnmarshalWithOptions(d.data, v, yaml.Strict()); err != nil {
		return suggestField(yamlError(d.name, err), v)
	}
	return nil
}

// unknownField is the library's message for a key no field has.
var unknownField = regexp.MustCompile(`^unknown field "([^"]+)"$`)

// suggestField adds to an unknown-field error the key that was most likely
// meant ("validator" → "validators"), from the keys v's type knows.
func suggestField(err error, v any) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	m := unknownField.FindStringSubmatch(e.Msg)
	if m == nil {
		return err
	}
	best, bestDist := "", 3 // suggest only a near miss: at most two edits
	for _, k := range yamlKeys(reflect.TypeOf(v), map[reflect.Type]bool{}) {
		if d := editDistance(strings.ToLower(m[1]), strings.ToLower(k)); d < bestDist {
			best, bestDist = k, d
		}
	}
	if best != "" {
		e.Msg += fmt.Sprintf(" (did you mean %q?)", best)
	}
	return e
}

// yamlKeys lists the yaml keys of a struct type and of the structs it holds.
func yamlKeys(t reflect.Type, seen map[reflect.Type]bool) []string {
	for t != nil && (t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map) {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct || seen[t] {
		return nil
	}
	seen[t] = true
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name != "" && name != "-" {
			keys = append(keys, name)
		}
		keys = append(keys, yamlKeys(f.Type, seen)...)
	}
	return keys
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// At returns an *Error for field (a dotted path such as "steps[0].usage")
// located in the document; a missing field is located at its parent.
func (d *Document) At(field, msg string, cause error) *Error {
	e := &Error{File: d.name, Field: field, Msg: msg, Err: cause}
	if field == "" {
		return e
	}
	// A missing field is reported where its parent mapping is.
	for path := field; path != ""; {
		if n := d.Lookup(path); n != nil {
			if tk := n.GetToken(); tk != nil && tk.Position != nil {
				e.Line, e.Column = tk.Position.Line, tk.Position.Column
			}
			return e
		}
		i := strings.LastIndex(path, ".")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return e
}

// yamlError turns the YAML library's error into an *Error with position.
func yamlError(name string, err error) error {
	e := &Error{File: name, Msg: err.Error(), Err: err}
	var ye interface {
		GetToken() *token.Token
		GetMessage() string
	}
	if errors.As(err, &ye) {
		e.Msg = ye.GetMessage()
		if tk := ye.GetToken(); tk != nil && tk.Position != nil {
			e.Line, e.Column = tk.Position.Line, tk.Position.Column
		}
	}
	// The library's messages put the position first; ours already says it.
	if i := strings.Index(e.Msg, "] "); strings.HasPrefix(e.Msg, "[") && i > 0 {
		e.Msg = e.Msg[i+2:]
	}
	return e
}

// Lookup returns the node at a dotted path, or nil.
func (d *Document) Lookup(field string) ast.Node {
	p, err := yaml.PathString("$." + field)
	if err != nil {
		return nil
	}
	n, err := p.FilterFile(d.file)
	if err != nil {
		return nil
	}
	return n
}

// DecodeFile reads a YAML or JSON file strictly into v: unknown keys are
// refused by name, and errors carry file, line and column.
func DecodeFile(path string, v any) error {
	data, err := ReadFile(path)
	if err != nil {
		return err
	}
	d, err := Parse(path, data)
	if err != nil {
		return err
	}
	return d.Decode(v)
}

// FieldError returns an *Error for a field of a file, located when possible.
func FieldError(path, field, msg string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return &Error{File: path, Field: field, Msg: msg}
	}
	d, err := Parse(path, data)
	if err != nil {
		return &Error{File: path, Field: field, Msg: msg}
	}
	return d.At(field, msg, nil)
}
