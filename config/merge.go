package config

import (
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// maxExpansion bounds how many nodes reading one field may visit through
// aliases and merge keys: merges of merges grow exponentially (a "billion
// laughs" file), and a field reached that many ways is not a budget.
const maxExpansion = 10_000

// fieldReader finds every node a dotted field may take its value from,
// following what the YAML library follows when it decodes: anchors, aliases
// and merge keys (<<), inline or aliased, alone or in a list. The plain
// path lookup sees none of these, so a number merged into a budget would
// reach the decoder unchecked (issue 23 #16: tokens: 1500.7 stored as 1500).
type fieldReader struct {
	anchors []*ast.AnchorNode // in the file's order
	visited int
}

func newFieldReader(d *document) *fieldReader {
	r := &fieldReader{}
	for _, doc := range d.file.Docs {
		// A document of comments only has no body, and the library's
		// walker panics on a nil node (found by FuzzParseBudget).
		if doc == nil || doc.Body == nil {
			continue
		}
		for _, n := range ast.Filter(ast.AnchorType, doc.Body) {
			if a, ok := n.(*ast.AnchorNode); ok {
				r.anchors = append(r.anchors, a)
			}
		}
	}
	return r
}

// values returns every node field may be decoded from, anchors and aliases
// resolved, and whether the search stayed within maxExpansion.
func (r *fieldReader) values(d *document, field string) ([]ast.Node, bool) {
	var nodes []ast.Node
	for _, doc := range d.file.Docs {
		if doc.Body != nil {
			nodes = append(nodes, doc.Body)
		}
	}
	for _, key := range strings.Split(field, ".") {
		var next []ast.Node
		for _, n := range nodes {
			next = r.children(next, n, key)
		}
		nodes = next
	}
	for i, n := range nodes {
		nodes[i] = r.resolve(n)
	}
	return nodes, r.visited <= maxExpansion
}

// children appends to out the values of key in the mapping n, its own and
// those merged into it.
func (r *fieldReader) children(out []ast.Node, n ast.Node, key string) []ast.Node {
	if r.visited++; r.visited > maxExpansion {
		return out
	}
	switch m := r.resolve(n).(type) {
	case *ast.MappingNode:
		for _, mv := range m.Values {
			out = r.entry(out, mv, key)
		}
	case *ast.MappingValueNode:
		out = r.entry(out, m, key)
	case *ast.SequenceNode: // a merge key's list of mappings
		for _, v := range m.Values {
			out = r.children(out, v, key)
		}
	}
	return out
}

func (r *fieldReader) entry(out []ast.Node, mv *ast.MappingValueNode, key string) []ast.Node {
	if mv.Key == nil || mv.Value == nil {
		return out
	}
	if mv.Key.IsMergeKey() {
		return r.children(out, mv.Value, key)
	}
	name := ""
	if s, ok := r.resolve(mv.Key).(*ast.StringNode); ok {
		name = s.Value
	} else if tk := mv.Key.GetToken(); tk != nil {
		name = tk.Value
	}
	if name == key {
		out = append(out, mv.Value)
	}
	return out
}

// resolve is the node an anchor or alias stands for: an anchor's value, and
// for an alias the value of the last anchor of its name defined before it.
func (r *fieldReader) resolve(n ast.Node) ast.Node {
	for range 64 {
		switch v := n.(type) {
		case *ast.AnchorNode:
			n = v.Value
		case *ast.AliasNode:
			a := r.anchorBefore(v)
			if a == nil {
				return n
			}
			n = a.Value
		default:
			return n
		}
	}
	return n
}

func (r *fieldReader) anchorBefore(alias *ast.AliasNode) *ast.AnchorNode {
	if alias.Value == nil {
		return nil
	}
	name := alias.Value.GetToken().Value
	at := offset(alias)
	var found *ast.AnchorNode
	for _, a := range r.anchors {
		if a.Name != nil && a.Name.GetToken().Value == name && offset(a) < at {
			found = a
		}
	}
	return found
}

func offset(n ast.Node) int {
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return tk.Position.Offset
	}
	return 0
}
