package config

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"

	"github.com/purser-dev/purser/budget"
)

// jsonNumber is the grammar of a JSON number.
var jsonNumber = regexp.MustCompile(`^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?$`)

// numberKind is what a numeric field accepts.
type numberKind int

const (
	anyNumber   numberKind = iota // dollars, minutes
	wholeNumber                   // tokens, iterations
)

// numberSpec is what a numeric field accepts: its kind and the largest
// value its type holds.
type numberSpec struct {
	kind numberKind
	max  *big.Rat
}

var (
	maxInt64   = new(big.Rat).SetInt64(math.MaxInt64)
	maxDollars = big.NewRat(math.MaxInt64, budget.NanosPerDollar)
	maxMinutes = big.NewRat(math.MaxInt64, int64(time.Minute))
)

// budgetNumbers are the numeric fields of a budget, by path, as the budget
// package defines them, with the largest value each type holds.
var budgetNumbers = func() map[string]numberSpec {
	m := map[string]numberSpec{}
	for _, f := range budget.Fields() {
		spec := numberSpec{anyNumber, maxInt64}
		if f.Whole {
			spec.kind = wholeNumber
		}
		switch {
		case strings.HasSuffix(f.Path, ".usd"):
			spec.max = maxDollars
		case strings.HasSuffix(f.Path, ".timeMinutes"):
			spec.max = maxMinutes
		}
		m[f.Path] = spec
	}
	return m
}()

// checkNumbers checks, before decoding, that each numeric field under prefix
// holds a finite number of the right kind. The YAML library would truncate
// 1.5 tokens to 1 and report a bad number without its line; this says both.
func (d *document) checkNumbers(prefix string, fields map[string]numberSpec) error {
	var errs []error
	r := newFieldReader(d)
	for field, spec := range fields {
		// Every node the field may be decoded from: its own, and those
		// merge keys and aliases bring in.
		nodes, ok := r.values(d, prefix+field)
		if !ok {
			return d.at(prefix+field, "too many aliases and merge keys to check its value", nil)
		}
		for _, n := range nodes {
			msg := numberProblem(n, spec.kind)
			if msg == "" {
				msg = rangeProblem(n, spec.max)
			}
			if msg != "" {
				errs = append(errs, d.atNode(prefix+field, n, msg))
				break
			}
		}
	}
	return errors.Join(sortErrors(errs)...)
}

// atNode is an error about field whose value is n, placed at n: where a
// merged or aliased value was written, not where it landed.
func (d *document) atNode(field string, n ast.Node, msg string) *Error {
	e := &Error{File: d.name, Field: field, Msg: msg}
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		e.Line, e.Column = tk.Position.Line, tk.Position.Column
	}
	return e
}

// rangeProblem says whether a number n is larger than max.
func rangeProblem(n ast.Node, max *big.Rat) string {
	tk := n.GetToken()
	if tk == nil {
		return ""
	}
	r, err := budget.ParseDecimal(strings.ReplaceAll(tk.Value, "_", ""))
	if err != nil {
		return "" // a form only the YAML library reads (0x10, 0o17): it checks those
	}
	if new(big.Rat).Abs(r).Cmp(max) > 0 {
		return fmt.Sprintf("%s is out of range", tk.Value)
	}
	return ""
}

func numberProblem(n ast.Node, kind numberKind) string {
	switch v := n.(type) {
	case *ast.IntegerNode:
		return ""
	case *ast.FloatNode:
		if math.IsNaN(v.Value) || math.IsInf(v.Value, 0) {
			return fmt.Sprintf("want a finite number, got %s", v.GetToken().Value)
		}
		if kind == wholeNumber && v.Value != math.Trunc(v.Value) {
			return fmt.Sprintf("want a whole number, got %s", v.GetToken().Value)
		}
		return ""
	case *ast.NanNode, *ast.InfinityNode:
		return fmt.Sprintf("want a finite number, got %s", n.GetToken().Value)
	case *ast.NullNode:
		return "want a number, got null (leave the key out to not enforce the metric)"
	case *ast.StringNode:
		// YAML 1.1 reads an exponent without a decimal point (5e-05, 1e3)
		// as a string; JSON and YAML 1.2 read it as the number it is.
		if tk := v.GetToken(); tk != nil && tk.Type == token.StringType && jsonNumber.MatchString(v.Value) {
			r, err := budget.ParseDecimal(v.Value)
			switch {
			case err != nil:
				return err.Error()
			case kind == wholeNumber && !r.IsInt():
				return fmt.Sprintf("want a whole number, got %s", v.Value)
			}
			return ""
		}
		return fmt.Sprintf("want a number, got the string %q", v.Value)
	}
	return fmt.Sprintf("want a number, got %s", n.Type())
}
