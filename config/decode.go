// Package config reads Purser's files (budgets, task files, the project's
// purser.yaml) into domain types, strictly: unknown keys are refused by name
// and every error carries the file, line and field.
package config

import (
	"errors"
	"slices"
	"strings"

	"github.com/goccy/go-yaml/ast"

	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/internal/yamlfile"
)

// Error is a problem in a file: where it is and what is wrong.
type Error = yamlfile.Error

// document is a parsed YAML (or JSON) file, kept to locate fields by path;
// name and file are the Document's, for the checks that walk its nodes.
type document struct {
	*yamlfile.Document
	name string
	file *ast.File
}

// parse reads data as YAML. JSON is YAML, so both are accepted.
func parse(name string, data []byte) (*document, error) {
	d, err := yamlfile.Parse(name, data)
	if err != nil {
		return nil, err
	}
	return &document{Document: d, name: name, file: d.AST()}, nil
}

// decode decodes the document strictly into v.
func (d *document) decode(v any) error { return d.Decode(v) }

// at returns an *Error for field located in the document.
func (d *document) at(field, msg string, cause error) *Error { return d.At(field, msg, cause) }

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
