package sandbox

import "strings"

// baseEnv are the names every box may keep from the host: where programs
// are, how text is encoded and shown, and the time zone. Nothing in them
// is a secret or a way to reach Purser.
var baseEnv = []string{"PATH", "LANG", "LANGUAGE", "TERM", "COLORTERM", "TZ", "NO_COLOR"}

// Names that reach no box, even when a task names them: Purser's own
// settings and serve token, PostgreSQL's settings and password, database
// URLs and webhook URLs. A hostile task file could name them; nothing a
// task legitimately runs needs them, since the box reaches no database and
// no webhook.
var (
	forbiddenPrefixes = []string{"PURSER_", "PG"}
	forbiddenNames    = []string{"DATABASE_URL"}
)

// EnvAllowList returns the environment of a box from environ (as
// os.Environ gives it): PATH, the locale (LANG, LANGUAGE, LC_*), TERM,
// COLORTERM, TZ and NO_COLOR, plus the names in extra — what the backend
// declares it needs and the task's own env: names. Everything else stays
// out, GITHUB_TOKEN and the like included unless extra names them. Names
// for which Forbidden holds never pass, even named in extra. A name in
// extra that environ does not set is left out; a name set twice keeps its
// last value, as a program started with environ would see.
func EnvAllowList(environ []string, extra ...string) map[string]string {
	wanted := map[string]bool{}
	for _, n := range extra {
		wanted[n] = true
	}
	env := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || Forbidden(k) {
			continue
		}
		if wanted[k] || baseName(k) {
			env[k] = v
		}
	}
	return env
}

// baseName reports whether k is one every box keeps.
func baseName(k string) bool {
	if strings.HasPrefix(k, "LC_") {
		return true
	}
	for _, n := range baseEnv {
		if k == n {
			return true
		}
	}
	return false
}

// Forbidden reports whether the environment variable k may never enter a
// box: PURSER_*, PG*, DATABASE_URL, and any name holding WEBHOOK (in any
// case). Configuration that names one for a box should be refused by
// name, before a run starts.
func Forbidden(k string) bool {
	u := strings.ToUpper(k)
	if strings.Contains(u, "WEBHOOK") {
		return true
	}
	for _, p := range forbiddenPrefixes {
		if strings.HasPrefix(u, p) {
			return true
		}
	}
	for _, n := range forbiddenNames {
		if u == n {
			return true
		}
	}
	return false
}
