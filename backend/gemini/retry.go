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
	"syscall"

	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/redact"
)

// Gemini CLI retries a failed request up to ten times by itself, for minutes
// (settings general.maxAttempts, at most 10), and reads no environment
// variable or flag for it (0.61.0: its bundle reads maxAttempts only from
// the merged settings). Its system settings file, named by
// GEMINI_CLI_SYSTEM_SETTINGS_PATH, overrides the user's and the workspace's:
// Purser gives it one that is the system settings in force with
// general.maxAttempts set to 1, so that the retries are Purser's alone.
//
// Gemini CLI reads a system settings file only when it and every directory
// above it are owned by root and writable by no one else
// (isFileAndDirectorySecureSync in its bundle); any other it skips with a
// warning on stderr. For a user who is not root, the file Purser writes in
// its cache is never such a file, and there is no other way to switch the
// retries off: Purser then says so (in the call's note and in purser check),
// and counts each retry Gemini CLI announces as an inner retry.

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

// errSettingsSkipped is why Gemini CLI would skip the settings Purser
// writes for it.
var errSettingsSkipped = errors.New("system settings are read by Gemini CLI only from a file root owns, in directories only root can write")

// readBySystemSettings tells whether Gemini CLI would read path as its
// system settings file: the file and every directory above it (as named,
// and as its symbolic links resolve) owned by uid 0 and not writable by
// group or others. It returns nil when it would, else why not.
func readBySystemSettings(path string) error {
	path = filepath.Clean(path)
	paths := []string{path}
	if real, err := filepath.EvalSymlinks(path); err == nil && real != path {
		paths = append(paths, real)
	}
	for _, p := range paths {
		for q := p; ; q = filepath.Dir(q) {
			if err := rootOnly(q); err != nil {
				return fmt.Errorf("%w, so it skips %s (%v): its own retries stay on, up to 10 attempts a request", errSettingsSkipped, p, err)
			}
			if filepath.Dir(q) == q {
				break
			}
		}
	}
	return nil
}

// rootOnly checks one path as Gemini CLI does: a symbolic link must itself
// be root's; what it names (or the path) must be root's and not writable by
// group or others.
func rootOnly(path string) error {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if uid, ok := owner(fi); ok && uid != 0 {
			return fmt.Errorf("the link %s is owned by uid %d", path, uid)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if uid, ok := owner(fi); ok && uid != 0 {
		return fmt.Errorf("%s is owned by uid %d", path, uid)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by group or others (%v)", path, fi.Mode().Perm())
	}
	return nil
}

// owner is a file's owner's uid, where the system says.
func owner(fi fs.FileInfo) (uint32, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
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
