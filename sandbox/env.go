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
		if !ok || k == "" || Forbidden(k) || protocolName(k) {
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
// box: PURSER_* (but the exec protocol's ProtocolEnv, which Purser sets per
// call), PG*, DATABASE_URL, and any name holding WEBHOOK (in any case).
// Configuration that names one for a box should be refused by
// name, before a run starts.
func Forbidden(k string) bool {
	if protocolName(k) {
		return false
	}
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

// ProtocolEnv are the variables Purser itself sets for one call of an exec
// agent (backend/exec's protocol: where the prompt is, where to report
// usage, what the call is). They are the only PURSER_ names a box may hold:
// they carry no secret, and EnvAllowList never takes them from Purser's
// own environment (the caller sets them in Box.Env for the call).
var ProtocolEnv = []string{"PURSER_PROMPT_FILE", "PURSER_USAGE_FILE", "PURSER_MODEL", "PURSER_CALL_KIND", "PURSER_ITERATION", "PURSER_MAX_OUTPUT_TOKENS"}

func protocolName(k string) bool {
	for _, n := range ProtocolEnv {
		if k == n {
			return true
		}
	}
	return false
}

// AllowedNames names what EnvAllowList keeps without being asked, for a
// user to read (purser check): the base names and LC_*.
func AllowedNames() []string {
	return append(append([]string{}, baseEnv...), "LC_*")
}
