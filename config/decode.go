// Package config reads Purser's files (budgets, task files, the project's
// purser.yaml) into domain types, strictly: unknown keys are refused by name
// and every error carries the file, line and field.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"

	"github.com/purser-dev/purser/budget"
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

// document is a parsed YAML (or JSON) file, kept to locate fields by path.
type document struct {
	name string
	data []byte
	file *ast.File
}

// parse reads data as YAML. JSON is YAML, so both are accepted.
func parse(name string, data []byte) (*document, error) {
	// A byte order mark is not part of the first key (nor visible in an
	// error about it).
	data = bytes.TrimPrefix(data, utf8BOM)
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
	return &document{name: name, data: data, file: f}, nil
}

// decode decodes the document strictly into v.
func (d *document) decode(v any) (err error) {
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

// at returns an *Error for field located in the document.
func (d *document) at(field, msg string, cause error) *Error {
	e := &Error{File: d.name, Field: field, Msg: msg, Err: cause}
	if field == "" {
		return e
	}
	// A missing field is reported where its parent mapping is.
	for path := field; path != ""; {
		if n := d.lookup(path); n != nil {
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

// decodeBudgeted parses data and decodes it strictly into v, after checking
// the budget numbers it holds under budgetAt ("" when the file is a budget,
// "budget." when it holds one) exactly, before the YAML library rounds them:
// the first steps of reading every file that holds a budget.
func decodeBudgeted(name string, data []byte, budgetAt string, v any) (*document, error) {
	d, err := parse(name, data)
	if err != nil {
		return nil, err
	}
	if err := d.checkNumbers(budgetAt, budgetNumbers); err != nil {
		return nil, err
	}
	if err := d.decode(v); err != nil {
		return nil, err
	}
	return d, nil
}

// ParseBudget reads a budget in the spec's TaskBudgetConfig shape from YAML or
// JSON and validates it. name labels errors.
func ParseBudget(name string, data []byte) (budget.Config, error) {
	var cfg budget.Config
	d, err := decodeBudgeted(name, data, "", &cfg)
	if err != nil {
		return budget.Config{}, err
	}
	if err := d.validateBudget(cfg, ""); err != nil {
		return budget.Config{}, err
	}
	return cfg, nil
}

// validateBudget validates cfg, locating each problem under prefix.
func (d *document) validateBudget(cfg budget.Config, prefix string) error {
	return d.locate(cfg.Validate(), prefix)
}

// locate places each of a budget's validation errors at its field's line.
func (d *document) locate(err error, prefix string) error {
	if err == nil {
		return nil
	}
	var errs []error
	for _, e := range unjoin(err) {
		var ve *budget.ValidationError
		if errors.As(e, &ve) {
			errs = append(errs, d.at(prefix+ve.Field, ve.Msg, ve))
			continue
		}
		errs = append(errs, d.at(strings.TrimSuffix(prefix, "."), e.Error(), e))
	}
	return errors.Join(sortErrors(errs)...)
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// LoadBudget reads and validates a budget file (YAML or JSON).
func LoadBudget(path string) (budget.Config, error) {
	data, err := readFile(path)
	if err != nil {
		return budget.Config{}, err
	}
	return ParseBudget(path, data)
}

// sortErrors orders *Errors by line so messages read top to bottom.
func sortErrors(errs []error) []error {
	line := func(e error) int {
		var ce *Error
		if errors.As(e, &ce) {
			return ce.Line*10000 + ce.Column
		}
		return 0
	}
	slices.SortStableFunc(errs, func(a, b error) int { return line(a) - line(b) })
	return errs
}
