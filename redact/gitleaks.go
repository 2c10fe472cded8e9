package redact

import (
	_ "embed"
	"fmt"
	"regexp"
	"strings"

	"github.com/BurntSushi/toml"
)

// gitleaksRules is gitleaks' default rule set, config/gitleaks.toml of
// github.com/zricethezav/gitleaks/v8 v8.30.1, unmodified (MIT licence:
// gitleaks.LICENSE beside it). To update it, copy the file of a newer
// release over it; TestGitleaksRulesLoad checks that every rule compiles.
//
//go:embed gitleaks.toml
var gitleaksRules []byte

// GitleaksVersion is the gitleaks release the rule set comes from.
const GitleaksVersion = "v8.30.1"

// tomlAllowlist is a gitleaks allowlist: a finding it matches is not a
// secret. Paths and commits have no meaning for text, so an allowlist made
// only of them never applies.
type tomlAllowlist struct {
	Condition   string   `toml:"condition"`
	RegexTarget string   `toml:"regexTarget"`
	Regexes     []string `toml:"regexes"`
	StopWords   []string `toml:"stopwords"`
	Paths       []string `toml:"paths"`
	Commits     []string `toml:"commits"`
}

type tomlRule struct {
	ID          string          `toml:"id"`
	Regex       string          `toml:"regex"`
	SecretGroup int             `toml:"secretGroup"`
	Entropy     float64         `toml:"entropy"`
	Keywords    []string        `toml:"keywords"`
	Path        string          `toml:"path"`
	Allowlists  []tomlAllowlist `toml:"allowlists"`
}

type tomlConfig struct {
	Allowlist tomlAllowlist `toml:"allowlist"`
	Rules     []tomlRule    `toml:"rules"`
}

func compileAllowlist(t tomlAllowlist) (*allowlist, error) {
	a := &allowlist{and: strings.EqualFold(t.Condition, "AND"), target: t.RegexTarget}
	for _, s := range t.Regexes {
		re, err := regexp.Compile(s)
		if err != nil {
			return nil, err
		}
		a.regexes = append(a.regexes, re)
	}
	for _, w := range t.StopWords {
		a.stopwords = append(a.stopwords, strings.ToLower(w))
	}
	// A path or commit check can never hold for text: alone (or ANDed) it
	// makes the allowlist inapplicable.
	needsPath := len(t.Paths) > 0 || len(t.Commits) > 0
	a.unusable = (needsPath && a.and) || (len(a.regexes) == 0 && len(a.stopwords) == 0)
	return a, nil
}

// loadGitleaks compiles the embedded rule set; each rule gets the global
// allowlist before its own. Rules meant only for files of one kind (a path)
// are left out.
func loadGitleaks() ([]*rule, error) {
	var cfg tomlConfig
	if _, err := toml.Decode(string(gitleaksRules), &cfg); err != nil {
		return nil, fmt.Errorf("gitleaks rules: %w", err)
	}
	global, err := compileAllowlist(cfg.Allowlist)
	if err != nil {
		return nil, fmt.Errorf("gitleaks global allowlist: %w", err)
	}
	var rules []*rule
	for _, tr := range cfg.Rules {
		if tr.Regex == "" || tr.Path != "" {
			continue
		}
		re, err := regexp.Compile(tr.Regex)
		if err != nil {
			return nil, fmt.Errorf("gitleaks rule %s: %w", tr.ID, err)
		}
		r := &rule{id: tr.ID, re: re, secretGroup: tr.SecretGroup, entropy: tr.Entropy, multiline: multiline(tr.Regex),
			allowlists: []*allowlist{global}}
		for _, k := range tr.Keywords {
			r.keywords = append(r.keywords, strings.ToLower(k))
		}
		for _, ta := range tr.Allowlists {
			a, err := compileAllowlist(ta)
			if err != nil {
				return nil, fmt.Errorf("gitleaks rule %s allowlist: %w", tr.ID, err)
			}
			r.allowlists = append(r.allowlists, a)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// multiline reports whether a rule's regexp is meant to match across
// lines: it names a line break or any character including one.
func multiline(src string) bool {
	for _, sign := range []string{`[\s\S`, `[\r\n]`, `\r\n`, `(?s`} {
		if strings.Contains(src, sign) {
			return true
		}
	}
	return false
}

// GitleaksRules loads the embedded gitleaks rules and returns how many are
// in use, or why they cannot be.
func GitleaksRules() (int, error) {
	rules, err := loadGitleaks()
	return len(rules), err
}
