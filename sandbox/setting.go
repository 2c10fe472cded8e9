package sandbox

import (
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Mode says whether a box is asked for: "" (not said: inherit, Default
// where nothing says), "off" or "on".
type Mode string

const (
	// ModeOff runs unboxed, as Purser did before boxes: the process has
	// Purser's user, environment, files, processes and network.
	ModeOff Mode = "off"
	// ModeOn runs in a box; where none can be made, Purser refuses to run.
	ModeOn Mode = "on"
)

// Default is the mode in force where neither a backend nor purser.yaml says
// one: on, so that an agent and the repository's validators never run with
// Purser's secrets, files and network unless the user wrote `sandbox: off`.
const Default = ModeOn

// Setting is a `sandbox:` key of purser.yaml or of a backend, as written:
// `off`, `on`, or `{mode: on, readOnly: [paths], env: [NAMES]}`.
type Setting struct {
	Mode Mode
	// ReadOnly are more host paths the box sees read-only (absolute once
	// read: relative ones are resolved against the file's directory).
	ReadOnly []string
	// Env are more environment variable names passed into the box, beside
	// the allow-list (EnvAllowList); a Forbidden name is refused.
	Env []string
	// Processes and MemoryMiB bound the box (processes: and memoryMiB:;
	// 0: DefaultLimits): its processes and threads at once, and each
	// process's memory (see Limits).
	Processes int
	MemoryMiB int64
	// Allow are the destinations (host:port, or *.suffix:port) the box may
	// reach through Purser's egress proxy (network: {allow: [...]}); the
	// caller passes them to Box.Allow.
	Allow []string
}

// Limits are the bounds the setting asks for, as a Box takes them.
func (s Setting) Limits() Limits {
	return Limits{Processes: s.Processes, MemoryBytes: s.MemoryMiB << 20}
}

// On reports whether the setting asks for a box.
func (s Setting) On() bool { return s.Mode == ModeOn }

// Resolved is s with the mode in force: Default where s says none.
func (s Setting) Resolved() Setting {
	if s.Mode == "" {
		s.Mode = Default
	}
	return s
}

// Over returns s where it says something (a mode), else under: a
// backend's setting overrides the project's.
func (s Setting) Over(under Setting) Setting {
	if s.Mode != "" {
		return s
	}
	return under
}

// SettingProblem is a part of a sandbox: value that cannot be read; Path is
// under the key ("" for the value itself, "mode", "readOnly[1]", …).
type SettingProblem struct {
	Path string
	Msg  string
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// settingKeys are the keys of the mapping form.
var settingKeys = []string{"env", "memoryMiB", "mode", "network", "processes", "readOnly"}

// ParseSetting reads a sandbox: value as a YAML library decodes it into an
// any (a string, a bool, or a map[string]any), strictly: an unknown key is
// refused by name, and a relative readOnly path is resolved against dir.
func ParseSetting(v any, dir string) (Setting, []SettingProblem) {
	var s Setting
	switch x := v.(type) {
	case string, bool:
		m, ok := parseMode(x)
		if !ok {
			return s, []SettingProblem{{"", fmt.Sprintf("want off, on or {mode: on, readOnly: [paths], env: [NAMES]}, got %v", x)}}
		}
		s.Mode = m
		return s, nil
	case map[string]any:
		var probs []SettingProblem
		for _, k := range slices.Sorted(maps.Keys(x)) {
			switch k {
			case "mode":
				m, ok := parseMode(x[k])
				if !ok {
					probs = append(probs, SettingProblem{"mode", fmt.Sprintf("want off or on, got %v", x[k])})
				}
				s.Mode = m
			case "readOnly":
				list, ok := stringList(x[k])
				if !ok {
					probs = append(probs, SettingProblem{"readOnly", "want a list of paths"})
				}
				for i, p := range list {
					if p == "" {
						probs = append(probs, SettingProblem{fmt.Sprintf("readOnly[%d]", i), "want a path"})
						continue
					}
					if !filepath.IsAbs(p) {
						p = filepath.Join(dir, p)
					}
					s.ReadOnly = append(s.ReadOnly, filepath.Clean(p))
				}
			case "env":
				list, ok := stringList(x[k])
				if !ok {
					probs = append(probs, SettingProblem{"env", "want a list of environment variable names"})
				}
				for i, n := range list {
					switch {
					case !envName.MatchString(n):
						probs = append(probs, SettingProblem{fmt.Sprintf("env[%d]", i), fmt.Sprintf("%q is not an environment variable name", n)})
					case Forbidden(n):
						probs = append(probs, SettingProblem{fmt.Sprintf("env[%d]", i), n + " never enters a box (PURSER_*, PG*, DATABASE_URL and webhook URLs stay outside)"})
					default:
						s.Env = append(s.Env, n)
					}
				}
			case "processes":
				n, ok := wholeNumber(x[k])
				if !ok || n < minProcesses || n > 1<<22 {
					probs = append(probs, SettingProblem{k, fmt.Sprintf("want a whole number of processes from %d (the box's init counts its own threads) to %d, got %v", minProcesses, 1<<22, x[k])})
				}
				s.Processes = int(n)
			case "memoryMiB":
				n, ok := wholeNumber(x[k])
				if !ok || n < 64 || n > 1<<30 {
					probs = append(probs, SettingProblem{k, fmt.Sprintf("want a whole number of MiB from 64 to %d, got %v", 1<<30, x[k])})
				}
				s.MemoryMiB = n
			case "network":
				var np []SettingProblem
				s.Allow, np = parseNetwork(x[k])
				probs = append(probs, np...)
			default:
				probs = append(probs, SettingProblem{k, fmt.Sprintf("unknown key (known: %s)", strings.Join(settingKeys, ", "))})
			}
		}
		if _, ok := x["mode"]; !ok {
			probs = append(probs, SettingProblem{"mode", "is required in the mapping form: on or off"})
		}
		return s, probs
	}
	return s, []SettingProblem{{"", fmt.Sprintf("want off, on or {mode: on, readOnly: [paths], env: [NAMES]}, got %v", v)}}
}

// parseMode reads off/on; YAML 1.1 readers may give them as booleans.
func parseMode(v any) (Mode, bool) {
	switch x := v.(type) {
	case string:
		switch x {
		case "off":
			return ModeOff, true
		case "on":
			return ModeOn, true
		}
	case bool:
		if x {
			return ModeOn, true
		}
		return ModeOff, true
	}
	return "", false
}

// wholeNumber reads a YAML integer, as a YAML library decodes it into an
// any.
func wholeNumber(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int64:
		return x, true
	case uint64:
		if x > 1<<62 {
			return 0, false
		}
		return int64(x), true
	case float64:
		if x != float64(int64(x)) {
			return 0, false
		}
		return int64(x), true
	}
	return 0, false
}

// stringList reads a YAML list of strings.
func stringList(v any) ([]string, bool) {
	list, ok := v.([]any)
	if !ok {
		return nil, v == nil
	}
	out := make([]string, 0, len(list))
	for _, item := range list {
		s, ok := item.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// parseNetwork reads network: {allow: [host:port, ...]}, strictly: an
// unknown key is refused by name, and so is each entry that is not
// host:port or *.suffix:port (see parseAllowEntry).
func parseNetwork(v any) ([]string, []SettingProblem) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, []SettingProblem{{"network", fmt.Sprintf("want {allow: [host:port, ...]}, got %v", v)}}
	}
	var allow []string
	var probs []SettingProblem
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if k != "allow" {
			probs = append(probs, SettingProblem{"network." + k, "unknown key (known: allow)"})
			continue
		}
		list, ok := allowItems(m[k])
		if !ok {
			probs = append(probs, SettingProblem{"network.allow", `want a list of host:port destinations, like ["registry.npmjs.org:443"]`})
		}
		for i, entry := range list {
			e, err := parseAllowEntry(entry)
			if err != nil {
				probs = append(probs, SettingProblem{fmt.Sprintf("network.allow[%d]", i), err.Error()})
				continue
			}
			allow = append(allow, e.String())
		}
	}
	return allow, probs
}

// allowItems reads the allow list. In a flow mapping ({allow: [a.b:443]})
// a YAML reader may take an unquoted host:port for a one-key mapping
// {a.b: 443}: read back as the host:port it was written as.
func allowItems(v any) ([]string, bool) {
	list, ok := v.([]any)
	if !ok {
		return nil, v == nil
	}
	out := make([]string, 0, len(list))
	for _, item := range list {
		switch x := item.(type) {
		case string:
			out = append(out, x)
		case map[string]any:
			if len(x) != 1 {
				return nil, false
			}
			for host, port := range x {
				n, ok := wholeNumber(port)
				if !ok {
					return nil, false
				}
				out = append(out, host+":"+strconv.FormatInt(n, 10))
			}
		default:
			return nil, false
		}
	}
	return out, true
}
