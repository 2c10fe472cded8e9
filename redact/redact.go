// Package redact keeps secrets out of everything Purser writes: logs,
// STATUS.md, BUDGET.md, transcripts and the database.
package redact

import (
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Mask replaces a secret.
const Mask = "[REDACTED]"

// secretName matches environment variable names that hold secrets.
var secretName = regexp.MustCompile(`(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)`)

// ownRules are Purser's own, run with gitleaks' rules: the shapes it has
// always redacted, and passwords in URLs, which gitleaks has no rule for.
func ownRules() []*rule {
	own := func(id, re string, keywords ...string) *rule {
		return &rule{id: id, re: regexp.MustCompile(re), keywords: keywords}
	}
	return []*rule{
		own("authorization-header", `(?i)authorization\s*[:=]\s*"?(?:bearer|basic|token)?\s*([^\s"',;]{6,})`, "authorization"),
		own("named-key", `(?i)(?:api[_-]?key|access[_-]?token|auth[_-]?token|secret|password|x-api-key|x-goog-api-key)["']?\s*[:=]\s*["']?([^\s"',;]{8,})`,
			"api", "access", "auth", "secret", "password"),
		// The password of a URL's user information: postgres://user:pass@host.
		own("url-password", `\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s/:@'"]*:([^\s/@'"]+)@`, "://"),
		own("openai-anthropic-openrouter-key", `\bsk-(?:ant-|proj-|or-v1-)?[A-Za-z0-9_\-]{16,}`, "sk-"),
		own("google-api-key", `\bAIza[0-9A-Za-z_\-]{30,}`, "aiza"),
		own("github-token", `\b(?:ghp|gho|ghs|ghu|github_pat)_[A-Za-z0-9_]{20,}`, "ghp_", "gho_", "ghs_", "ghu_", "github_pat_"),
		own("slack-token", `\bxox[abpr]-[A-Za-z0-9\-]{10,}`, "xox"),
	}
}

// rules is every rule String runs, compiled once, on first use.
var rules = sync.OnceValues(func() (*ruleSet, error) {
	gl, err := loadGitleaks()
	if err != nil {
		return nil, err
	}
	return newRuleSet(append(ownRules(), gl...)), nil
})

var (
	mu      sync.Mutex
	envSeen []string // the environment last read
	values  []string // secret values from it, longest first
)

// envSecrets returns the values of secret-named environment variables (8
// characters or more), longest first; it rereads the environment when it
// changed.
func envSecrets() []string {
	env := os.Environ()
	mu.Lock()
	defer mu.Unlock()
	if slices.Equal(env, envSeen) {
		return values
	}
	envSeen = env
	values = values[:0:0]
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		if len(value) >= 8 && secretName.MatchString(name) {
			values = append(values, value)
		}
	}
	sort.Slice(values, func(i, j int) bool { return len(values[i]) > len(values[j]) })
	return values
}

// String removes secrets from s: the values of secret-named environment
// variables, Authorization headers, key=value pairs naming keys or tokens,
// passwords in URLs, well-known key shapes, and whatever gitleaks' default
// rules (GitleaksVersion) find.
func String(s string) string {
	for _, v := range envSecrets() {
		s = strings.ReplaceAll(s, v, Mask)
	}
	rs, err := rules()
	if err != nil {
		return s // cannot happen: TestGitleaksRulesLoad loads the embedded rules
	}
	return mask(s, rs.find(s))
}

// Bytes is String for bytes.
func Bytes(b []byte) []byte { return []byte(String(string(b))) }
