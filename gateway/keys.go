package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// Key is where a lane's real provider key is: Purser's environment
// variable Env, or File — its first line, or, with Field, the string at
// that dotted path of the JSON file (a login such as Claude Code's
// ~/.claude/.credentials.json, claudeAiOauth.accessToken). The zero Key
// holds none: the agent's own credentials pass to the provider unchanged
// (a CLI logged in by itself, metered but not keyed by the door).
type Key struct {
	Env   string
	File  string
	Field string
	// Bearer puts the key upstream as Authorization: Bearer whatever the
	// protocol's own key header: Anthropic's OAuth tokens and
	// ANTHROPIC_AUTH_TOKEN go there, its API keys in x-api-key.
	Bearer bool
}

// Held reports whether the key names a place to read a key from.
func (k Key) Held() bool { return k.Env != "" || k.File != "" }

// Name says where the key is without its value, for purser check and notes.
func (k Key) Name() string {
	switch {
	case k.Env != "":
		return "$" + k.Env
	case k.File != "" && k.Field != "":
		return "file " + k.File + " (" + k.Field + ")"
	case k.File != "":
		return "file " + k.File
	}
	return "none (the agent's own credentials pass through)"
}

// maxKeyFile bounds a key or login file read.
const maxKeyFile = 1 << 20

// value reads the key: Env from getenv (nil: os.Getenv), or the file.
func (k Key) value(getenv func(string) string) (string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	switch {
	case k.Env != "":
		v := strings.TrimSpace(getenv(k.Env))
		if v == "" {
			return "", fmt.Errorf("gateway: the provider key's variable %s is not set", k.Env)
		}
		return v, nil
	case k.File != "":
		return k.fromFile()
	}
	return "", nil
}

func (k Key) fromFile() (string, error) {
	fi, err := os.Stat(k.File)
	if err != nil {
		return "", fmt.Errorf("gateway: reading the provider key: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxKeyFile {
		return "", fmt.Errorf("gateway: the provider key file %s is not a regular file of at most 1 MiB", k.File)
	}
	b, err := os.ReadFile(k.File)
	if err != nil {
		return "", fmt.Errorf("gateway: reading the provider key: %w", err)
	}
	var v string
	if k.Field != "" {
		if v, err = jsonField(b, k.Field); err != nil {
			return "", fmt.Errorf("gateway: the provider key file %s: %w", k.File, err)
		}
	} else {
		v, _, _ = strings.Cut(string(b), "\n")
	}
	if v = strings.TrimSpace(v); v == "" {
		return "", fmt.Errorf("gateway: the provider key file %s holds no key", k.File)
	}
	return v, nil
}

// jsonField is the string at a dotted path of a JSON object. Its errors
// name the path, never a value.
func jsonField(b []byte, path string) (string, error) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return "", fmt.Errorf("not JSON (%s wanted)", path)
	}
	for _, part := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return "", fmt.Errorf("no %s in it", path)
		}
		if v, ok = m[part]; !ok {
			return "", fmt.Errorf("no %s in it", path)
		}
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s is not a string", path)
	}
	return s, nil
}

// put sets the real key in h, in the place protocol wants it (or
// Authorization: Bearer for a Bearer key), the token's places cleared.
func (k Key) put(h http.Header, protocol, key string) {
	h.Del("x-api-key")
	h.Del("Authorization")
	h.Del("x-goog-api-key")
	switch {
	case k.Bearer:
		h.Set("Authorization", "Bearer "+key)
	case protocol == Anthropic:
		h.Set("x-api-key", key)
	case protocol == Gemini:
		h.Set("x-goog-api-key", key)
	default:
		h.Set("Authorization", "Bearer "+key)
	}
}
