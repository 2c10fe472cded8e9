// Package redact keeps secrets out of everything Purser writes: logs,
// STATUS.md, BUDGET.md, transcripts and the database.
package redact

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// Mask replaces a secret.
const Mask = "[REDACTED]"

// secretName matches environment variable names that hold secrets.
var secretName = regexp.MustCompile(`(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)`)

// patterns match secrets by their shape, whatever variable holds them.
var patterns = []*regexp.Regexp{
	regexp.MustCompile(`(?i)(authorization\s*[:=]\s*"?(?:bearer|basic|token)?\s*)[^\s"',;]{6,}`),
	regexp.MustCompile(`(?i)((?:api[_-]?key|access[_-]?token|auth[_-]?token|secret|password|x-api-key|x-goog-api-key)["']?\s*[:=]\s*["']?)[^\s"',;]{8,}`),
	regexp.MustCompile(`\bsk-(?:ant-|proj-|or-v1-)?[A-Za-z0-9_\-]{16,}`),
	regexp.MustCompile(`\bAIza[0-9A-Za-z_\-]{30,}`),
	regexp.MustCompile(`\b(?:ghp|gho|ghs|ghu|github_pat)_[A-Za-z0-9_]{20,}`),
	regexp.MustCompile(`\bxox[abpr]-[A-Za-z0-9\-]{10,}`),
}

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
	if len(env) == len(envSeen) && strings.Join(env, "\x00") == strings.Join(envSeen, "\x00") {
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
// and well-known key shapes.
func String(s string) string {
	for _, v := range envSecrets() {
		s = strings.ReplaceAll(s, v, Mask)
	}
	for i, p := range patterns {
		if i < 2 {
			s = p.ReplaceAllString(s, "${1}"+Mask)
			continue
		}
		s = p.ReplaceAllString(s, Mask)
	}
	return s
}

// Bytes is String for bytes.
func Bytes(b []byte) []byte { return []byte(String(string(b))) }
