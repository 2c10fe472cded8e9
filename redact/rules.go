package redact

import (
	"math"
	"regexp"
	"sort"
	"strings"
)

// rule finds one kind of secret.
type rule struct {
	id string
	re *regexp.Regexp
	// secretGroup is the group holding the secret; 0: the first non-empty
	// group, or the whole match when there is none.
	secretGroup int
	entropy     float64 // a secret must have more (bits per byte); 0: any
	allowlists  []*allowlist
	keywords    []string // lower case; the rule runs only where one occurs
	// multiline rules (a PEM block) run on the whole text; the others on
	// each line that holds one of their keywords, where a short input lets
	// Go's regexp use its fast backtracker.
	multiline bool
}

// allowlist lets through, as no secret, a finding it matches (gitleaks'
// allowlists, less the file paths and commits that text does not have).
type allowlist struct {
	and       bool
	target    string // "" (the secret), "match" or "line"
	regexes   []*regexp.Regexp
	stopwords []string // lower case
	unusable  bool     // it needs a path or a commit to match
}

// allows reports whether the allowlist lets a finding through, by
// gitleaks' rules: with condition AND every check it has must hold,
// otherwise any one.
func (a *allowlist) allows(secret, match, line string) bool {
	if a.unusable {
		return false
	}
	target := secret
	switch a.target {
	case "match":
		target = match
	case "line":
		target = line
	}
	var checks []bool
	if len(a.regexes) > 0 {
		hit := false
		for _, re := range a.regexes {
			if re.MatchString(target) {
				hit = true
				break
			}
		}
		checks = append(checks, hit)
	}
	if len(a.stopwords) > 0 {
		lower, hit := strings.ToLower(secret), false
		for _, w := range a.stopwords {
			if strings.Contains(lower, w) {
				hit = true
				break
			}
		}
		checks = append(checks, hit)
	}
	if len(checks) == 0 {
		return false
	}
	for _, c := range checks {
		if c && !a.and {
			return true
		}
		if !c && a.and {
			return false
		}
	}
	return a.and
}

// ruleSet is compiled rules with an index of their keywords: one pass over
// a text finds which rules can match on which line, and only those run
// (as gitleaks prefilters by keyword). That keeps redaction cheap on the
// long, secret-free text most of what Purser records is.
type ruleSet struct {
	rules []*rule
	// byPrefix maps the first two bytes of a keyword to an index of
	// keywords+1 (0: no keyword starts so).
	byPrefix []int32
	keywords [][]keyword
	always   []int // rules with a keyword shorter than two bytes, or none
}

type keyword struct {
	word  string
	rules []int
}

func newRuleSet(rules []*rule) *ruleSet {
	rs := &ruleSet{rules: rules, byPrefix: make([]int32, 1<<16)}
	words := map[string][]int{}
	for i, r := range rules {
		short := len(r.keywords) == 0
		for _, k := range r.keywords {
			if len(k) < 2 {
				short = true
				continue
			}
			words[k] = append(words[k], i)
		}
		if short {
			rs.always = append(rs.always, i)
		}
	}
	sorted := make([]string, 0, len(words))
	for w := range words {
		sorted = append(sorted, w)
	}
	sort.Strings(sorted)
	for _, w := range sorted {
		p := uint16(w[0])<<8 | uint16(w[1])
		if rs.byPrefix[p] == 0 {
			rs.keywords = append(rs.keywords, nil)
			rs.byPrefix[p] = int32(len(rs.keywords))
		}
		k := rs.byPrefix[p] - 1
		rs.keywords[k] = append(rs.keywords[k], keyword{word: w, rules: words[w]})
	}
	return rs
}

// lowerASCII lower-cases ASCII letters only, so that byte offsets into the
// result are offsets into s (strings.ToLower may change lengths).
func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// span is a byte range of a text to mask.
type span struct{ start, end int }

// find returns the ranges of s the rules take for secrets.
func (rs *ruleSet) find(s string) []span {
	lower := lowerASCII(s)
	var out []span
	whole := map[int]bool{} // multiline rules to run on all of s
	for _, i := range rs.always {
		whole[i] = true
	}
	lineStart, lineRules := 0, map[int]bool{}
	endLine := func(end int) {
		for i := range lineRules {
			out = rs.match(out, i, s, lineStart, end)
		}
		clear(lineRules)
	}
	for i := 0; i+1 < len(lower); i++ {
		if lower[i] == '\n' {
			endLine(i)
			lineStart = i + 1
			continue
		}
		k := rs.byPrefix[uint16(lower[i])<<8|uint16(lower[i+1])]
		if k == 0 {
			continue
		}
		for _, kw := range rs.keywords[k-1] {
			if !strings.HasPrefix(lower[i:], kw.word) {
				continue
			}
			for _, r := range kw.rules {
				if rs.rules[r].multiline {
					whole[r] = true
				} else {
					lineRules[r] = true
				}
			}
		}
	}
	endLine(len(s))
	for i := range whole {
		out = rs.match(out, i, s, 0, len(s))
	}
	return out
}

// match adds the secrets rule i finds in s[from:to] to out: each match's
// secret group, unless its entropy is at most the rule's threshold or an
// allowlist lets it through.
func (rs *ruleSet) match(out []span, i int, s string, from, to int) []span {
	r := rs.rules[i]
	text := s[from:to]
	for _, m := range r.re.FindAllStringSubmatchIndex(text, -1) {
		start, end := m[0], m[1]
		if r.secretGroup > 0 && 2*r.secretGroup+1 < len(m) {
			start, end = m[2*r.secretGroup], m[2*r.secretGroup+1]
		} else if r.secretGroup == 0 {
			for g := 1; 2*g+1 < len(m); g++ {
				if m[2*g] >= 0 && m[2*g+1] > m[2*g] {
					start, end = m[2*g], m[2*g+1]
					break
				}
			}
		}
		if start < 0 || end <= start {
			continue
		}
		secret := text[start:end]
		if r.entropy != 0 && shannon(secret) <= r.entropy {
			continue
		}
		if len(r.allowlists) > 0 && allowed(r.allowlists, secret, text[m[0]:m[1]], lineOf(text, m[0], m[1])) {
			continue
		}
		out = append(out, span{from + start, from + end})
	}
	return out
}

func allowed(lists []*allowlist, secret, match, line string) bool {
	for _, a := range lists {
		if a.allows(secret, match, line) {
			return true
		}
	}
	return false
}

// lineOf returns the line(s) of s holding s[start:end].
func lineOf(s string, start, end int) string {
	from := strings.LastIndexByte(s[:start], '\n') + 1
	to := strings.IndexByte(s[end:], '\n')
	if to < 0 {
		return s[from:]
	}
	return s[from : end+to]
}

// shannon is the Shannon entropy of s in bits per byte; gitleaks computes
// the same for the ASCII its secrets are made of.
func shannon(s string) float64 {
	if s == "" {
		return 0
	}
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	var e float64
	n := float64(len(s))
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			e -= p * math.Log2(p)
		}
	}
	return e
}

// mask replaces the spans of s by Mask, overlapping or touching ones once.
func mask(s string, spans []span) string {
	if len(spans) == 0 {
		return s
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	merged := spans[:1]
	for _, sp := range spans[1:] {
		last := &merged[len(merged)-1]
		if sp.start <= last.end {
			last.end = max(last.end, sp.end)
			continue
		}
		merged = append(merged, sp)
	}
	var b strings.Builder
	at := 0
	for _, sp := range merged {
		b.WriteString(s[at:sp.start])
		b.WriteString(Mask)
		at = sp.end
	}
	b.WriteString(s[at:])
	return b.String()
}
