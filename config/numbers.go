package config

import (
	"errors"
	"fmt"
	"math"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"

	"github.com/purser-dev/purser/budget"
)

// numberKind is what a numeric field accepts.
type numberKind int

const (
	anyNumber   numberKind = iota // dollars, minutes
	wholeNumber                   // tokens, iterations
)

// budgetNumbers are the numeric fields of a budget, by path, as the budget
// package defines them.
var budgetNumbers = func() map[string]numberKind {
	m := map[string]numberKind{}
	for _, f := range budget.Fields() {
		m[f.Path] = anyNumber
		if f.Whole {
			m[f.Path] = wholeNumber
		}
	}
	return m
}()

// lookup returns the node at a dotted path, or nil.
func (d *document) lookup(field string) ast.Node {
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

// checkNumbers checks, before decoding, that each numeric field under prefix
// holds a finite number of the right kind. The YAML library would truncate
// 1.5 tokens to 1 and report a bad number without its line; this says both.
func (d *document) checkNumbers(prefix string, fields map[string]numberKind) error {
	var errs []error
	for field, kind := range fields {
		n := d.lookup(prefix + field)
		if n == nil {
			continue
		}
		if msg := numberProblem(n, kind); msg != "" {
			errs = append(errs, d.at(prefix+field, msg, nil))
		}
	}
	return errors.Join(sortErrors(errs)...)
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
		return fmt.Sprintf("want a number, got the string %q", v.Value)
	}
	return fmt.Sprintf("want a number, got %s", n.Type())
}
