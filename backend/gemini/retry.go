package gemini

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/redact"
)

// Gemini CLI retries a failed request up to ten times by itself, for minutes
// (settings general.maxAttempts, at most 10), and reads no environment
// variable for it. Its system settings file, named by
// GEMINI_CLI_SYSTEM_SETTINGS_PATH, overrides the user's and the workspace's:
// Purser gives it one that is the system settings in force with
// general.maxAttempts set to 1, so that the retries are Purser's alone.

// systemSettingsEnv names the system settings file Gemini CLI reads.
const systemSettingsEnv = "GEMINI_CLI_SYSTEM_SETTINGS_PATH"

// defaultSystemSettings is where Gemini CLI looks on Linux without it.
const defaultSystemSettings = "/etc/gemini-cli/settings.json"

// noRetrySettings writes the system settings that switch Gemini CLI's own
// retries off into dir, and returns their path. current is the system
// settings file in force ("" when none is named: the default path); a
// missing file is no settings. Gemini CLI skips a settings file under a
// directory others may write to, so dir must be private.
func noRetrySettings(dir, current string) (string, error) {
	if current == "" {
		current = defaultSystemSettings
	}
	settings := map[string]any{}
	data, err := os.ReadFile(current)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return "", fmt.Errorf("reading Gemini CLI's system settings %s: %w", current, err)
	default:
		if err := json.Unmarshal(data, &settings); err != nil {
			return "", fmt.Errorf("the system settings %s of Gemini CLI are not plain JSON (%v): its own retries stay on", current, err)
		}
	}
	general, _ := settings["general"].(map[string]any)
	if general == nil {
		general = map[string]any{}
	}
	general["maxAttempts"] = 1
	settings["general"] = general
	out, err := json.MarshalIndent(settings, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	sum := sha256.Sum256(out)
	path := filepath.Join(dir, "system-settings-"+hex.EncodeToString(sum[:8])+".json")
	if existing, err := os.ReadFile(path); err == nil && string(existing) == string(out) {
		return path, nil
	}
	tmp, err := os.CreateTemp(dir, "system-settings-*.tmp")
	if err != nil {
		return "", err
	}
	if _, err := tmp.Write(out); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	return path, os.Rename(tmp.Name(), path)
}

// settingsDir is where Purser keeps the settings it gives Gemini CLI.
func settingsDir() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "purser", "gemini-cli"), nil
}

// retryLine is how Gemini CLI announces a retry of its own on stderr.
var retryLine = regexp.MustCompile(`Attempt \d+ failed.*Retrying`)

// innerRetries counts the retries Gemini CLI announced in stderr.
func innerRetries(stderr string) int { return len(retryLine.FindAllStringIndex(stderr, -1)) }

// Classify tells the fault of a failed result from Gemini CLI's words. A
// result that failed with no words at all is how Gemini CLI ends a stream
// that broke (the fixtures' dropped connection): a dropped connection.
func Classify(failed string) error {
	f := proc.TextFault(failed)
	if strings.TrimSpace(failed) == "error" || strings.TrimSpace(failed) == "" {
		f = proc.FaultDropped
	}
	return &proc.FaultError{Backend: "gemini", Fault: f, Detail: redact.String(failed)}
}
