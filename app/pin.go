package app

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/sandbox"
	"github.com/purser-dev/purser/workspace"
)

// What governs an agent (issue 20): the billing mode, the database, the
// backend's command, environment and models, the sandbox, the named budgets
// drawn from. When a task's file or its purser.yaml lies inside its
// workspace, the agent can rewrite them: `billing: subscription` turns the
// money cap off, `database:` elsewhere starts the ledger from $0. So these
// values are pinned at the task's first start, in a file of the user's
// state directory (outside every workspace), and every later start (run,
// resume, a worker's job) compares: a change is refused by name, with the
// diff, unless the user accepts it from outside (--accept-config). A task
// whose files all lie outside its workspace is governed by the user alone:
// nothing is pinned and its files are read as they are.
//
// The budget itself is pinned by the engine, in the task's record (a change
// from a file in the workspace is refused there; --budget FILE raises it).

// Pinned is what governs a task, as key → value shown; the keys name where
// each comes from (billing, backend.models.cheap, purser.yaml database:, …).
type Pinned map[string]string

// pinFile is the file a task's pins are kept in (its version 1 form).
type pinFile struct {
	Task    string `json:"task"`
	File    string `json:"file"`
	Project string `json:"project,omitempty"`
	Values  Pinned `json:"values"`
}

// PinChange is one pinned value that differs: From is "" for a key that was
// not there, To "" for one that is gone.
type PinChange struct {
	Key, From, To string
}

// String is the change as the refusal lists it: "key: from → to".
func (c PinChange) String() string {
	show := func(v string) string {
		if v == "" {
			return "(none)"
		}
		return v
	}
	return fmt.Sprintf("%s: %s → %s", c.Key, show(c.From), show(c.To))
}

// ConfigChangedError refuses a task whose governing values changed since its
// first start, in a file inside its workspace (where the agent can write).
type ConfigChangedError struct {
	Task      string
	Files     []string // the files inside the workspace that govern it
	Workspace string
	Changes   []PinChange
}

// Error names the task, the files inside its workspace, every change, and
// how the user accepts them.
func (e *ConfigChangedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "task %s: what governs it changed since its first start, and %s inside its workspace %s, where the agent can write; refused:",
		e.Task, filesPhrase(e.Files), e.Workspace)
	for _, c := range e.Changes {
		b.WriteString("\n  " + c.String())
	}
	fmt.Fprintf(&b, "\nIf you made this change, accept it from outside the workspace: purser resume %s --accept-config (or purser run --accept-config)", e.Task)
	return b.String()
}

// filesPhrase names the files: "task.yaml lies" or "a and b lie".
func filesPhrase(files []string) string {
	if len(files) == 1 {
		return files[0] + " lies"
	}
	return strings.Join(files, " and ") + " lie"
}

// ErrConfigChanged matches every ConfigChangedError.
var ErrConfigChanged = errors.New("what governs the task changed inside its workspace")

// Is makes errors.Is(err, ErrConfigChanged) true.
func (e *ConfigChangedError) Is(target error) bool { return target == ErrConfigChanged }

// Governing is what governs t, with its project proj (nil: none): the
// values pinned. Secrets never enter it: a database URL is shown with its
// password masked and a hash of the whole.
func Governing(proj *config.Project, t purser.Task) Pinned {
	v := Pinned{}
	billing := string(t.Backend.Billing)
	if billing == "" {
		billing = string(purser.BillingAPI)
	}
	v["billing"] = billing
	v["backend"] = t.Backend.Name
	v["backend.type"] = t.Backend.Type
	for tier, model := range t.Backend.Models {
		v["backend.models."+tier] = model
	}
	if t.Backend.Options != nil {
		if b, err := json.Marshal(t.Backend.Options); err == nil {
			v["backend.options"] = string(b)
		}
	}
	if t.Backend.AllowUnpriced {
		v["backend.unpricedModel"] = "allow"
	}
	if sb, ok := BackendSandbox(t.Backend); ok {
		// Written out field by field, as the project's is: a new field of
		// the setting must not read as a change to every pinned run.
		v["backend.sandbox"] = sandboxText(sb.Setting)
	}
	if len(t.DrawFrom) > 0 {
		v["drawFrom"] = strings.Join(t.DrawFrom, ", ")
	}
	v["workspace"] = t.Workspace
	if proj == nil {
		return v
	}
	key := "purser.yaml "
	if proj.File == "" {
		v[key+"file"] = "(none in " + proj.Dir + ")"
	} else {
		v[key+"file"] = proj.File
	}
	if proj.DatabaseSet {
		v[key+"database"] = shownSecret(proj.Database)
	} else {
		v[key+"database"] = "(not set: the default, " + proj.Database + ")"
	}
	if proj.Durability != "" {
		v[key+"durability"] = proj.Durability
	}
	v[key+"sandbox"] = sandboxText(proj.Sandbox)
	if proj.Budget != nil {
		v[key+"budget"] = budgetText(proj.Budget)
	}
	if len(proj.DrawFrom) > 0 {
		v[key+"drawFrom"] = strings.Join(proj.DrawFrom, ", ")
	}
	for name, spec := range proj.Backends {
		p := key + "backends." + name + "."
		v[p+"type"] = spec.Type
		if spec.Billing != "" {
			v[p+"billing"] = string(spec.Billing)
		}
		for tier, model := range spec.Models {
			v[p+"models."+tier] = model
		}
		if spec.Options != nil {
			if b, err := json.Marshal(spec.Options); err == nil {
				v[p+"options"] = string(b)
			}
		}
	}
	return v
}

// shownSecret is a database location fit for the pin file and the diff: as
// ShownDatabase, with a short hash of the whole when something was masked,
// so that a changed password is a change without being written down.
func shownSecret(path string) string {
	shown := ShownDatabase(path)
	if shown == path {
		return path
	}
	sum := sha256.Sum256([]byte(path))
	return shown + " [sha256 " + hex.EncodeToString(sum[:6]) + "]"
}

// sandboxText is a sandbox: setting as a pin records it: its mode as
// written ("(not set)": on by default) and each bound or list it sets.
func sandboxText(st sandbox.Setting) string {
	s := string(st.Mode)
	if s == "" {
		s = "(not set)"
	}
	if len(st.ReadOnly) > 0 {
		s += " readOnly " + strings.Join(st.ReadOnly, ",")
	}
	if len(st.Env) > 0 {
		s += " env " + strings.Join(st.Env, ",")
	}
	if len(st.Allow) > 0 {
		s += " network.allow " + strings.Join(st.Allow, ",")
	}
	if st.Processes != 0 {
		s += fmt.Sprintf(" processes %d", st.Processes)
	}
	if st.MemoryMiB != 0 {
		s += fmt.Sprintf(" memoryMiB %d", st.MemoryMiB)
	}
	return s
}

func budgetText(c *budget.Config) string {
	b, err := json.Marshal(c)
	if err != nil {
		return "?"
	}
	return string(b)
}

// Diff lists the keys whose values differ between was and now, sorted.
func (was Pinned) Diff(now Pinned) []PinChange {
	keys := map[string]bool{}
	for k := range was {
		keys[k] = true
	}
	for k := range now {
		keys[k] = true
	}
	var out []PinChange
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if was[k] != now[k] {
			out = append(out, PinChange{Key: k, From: was[k], To: now[k]})
		}
	}
	return out
}

// PinDir is where pins are kept: the user's state directory
// ($XDG_STATE_HOME/purser/pins, ~/.local/state/purser/pins by default),
// outside every workspace; "" where there is no home to keep them in.
func PinDir() string {
	state := os.Getenv("XDG_STATE_HOME")
	if state == "" || !filepath.IsAbs(state) {
		home, err := os.UserHomeDir()
		if err != nil || home == "" || !filepath.IsAbs(home) {
			return ""
		}
		state = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(state, "purser", "pins")
}

// pinPath is the pin file of task id read from file: keyed by both, since
// the user names the file (an agent can change neither which file a resume
// reads, recorded in the database, nor the id it must keep).
func pinPath(dir, id, file string) string {
	abs, err := filepath.Abs(file)
	if err != nil {
		abs = file
	}
	sum := sha256.Sum256([]byte(id + "\x00" + abs))
	safe := strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == 0 || r == '.' {
			return '_'
		}
		return r
	}, id)
	if len(safe) > 64 {
		safe = safe[:64]
	}
	return filepath.Join(dir, safe+"-"+hex.EncodeToString(sum[:8])+".json")
}

// governingFilesInside names the files that govern t and lie inside its
// workspace: its task file, its purser.yaml.
func governingFilesInside(proj *config.Project, t purser.Task) []string {
	var in []string
	if workspace.Contains(t.Workspace, t.File) {
		in = append(in, t.File)
	}
	if proj != nil {
		f := proj.File
		if f == "" {
			// Its absence decides too: a purser.yaml the agent
			// deletes brings the defaults back.
			f = filepath.Join(proj.Dir, config.ProjectFileName)
		}
		if workspace.Contains(t.Workspace, f) {
			if proj.File == "" {
				f += " (none yet; one written there would be read)"
			}
			in = append(in, f)
		}
	}
	return in
}

// CheckPins compares each task's governing values with those pinned at its
// first start: a task whose task file or purser.yaml lies inside its
// workspace, with a change, is refused (*ConfigChangedError, bad input)
// unless accept, in which case the change is said on w. It returns commit,
// which pins the values (where none were, or accepted), to call once every
// other check passed: a start refused for another reason pins nothing, so
// that the user may still fix the file. Tasks whose governing files all lie
// outside their workspace are not pinned.
func CheckPins(w io.Writer, proj *config.Project, tasks []purser.Task, accept bool) (commit func() error, err error) {
	noop := func() error { return nil }
	dir := PinDir()
	if dir == "" {
		return noop, nil
	}
	type write struct {
		path string
		pf   pinFile
	}
	var writes []write
	for _, t := range tasks {
		if t.File == "" {
			continue
		}
		inside := governingFilesInside(proj, t)
		path := pinPath(dir, t.ID, t.File)
		now := Governing(proj, t)
		pf := pinFile{Task: t.ID, File: t.File, Values: now}
		if proj != nil {
			pf.Project = proj.File
		}
		was, err := readPin(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if len(inside) > 0 {
				writes = append(writes, write{path, pf})
			}
			continue
		case err != nil:
			return nil, fmt.Errorf("task %s: reading what governs it, pinned at its first start: %w", t.ID, err)
		}
		changes := was.Values.Diff(now)
		if len(changes) == 0 {
			continue
		}
		if len(inside) > 0 && !accept {
			return nil, BadInput(&ConfigChangedError{Task: t.ID, Files: inside, Workspace: t.Workspace, Changes: changes})
		}
		if accept && len(inside) > 0 {
			fmt.Fprintf(w, "purser: task %s: the changes to what governs it are accepted (--accept-config, by %s):\n", t.ID, Whoami())
			for _, c := range changes {
				fmt.Fprintf(w, "  %s\n", c)
			}
		}
		writes = append(writes, write{path, pf})
	}
	// Nothing is pinned unless every task passed.
	return func() error {
		for _, wr := range writes {
			if err := writePin(wr.path, wr.pf); err != nil {
				return fmt.Errorf("task %s: pinning what governs it: %w", wr.pf.Task, err)
			}
		}
		return nil
	}, nil
}

// maxPinBytes bounds a pin file read: it is Purser's own, small.
const maxPinBytes = 1 << 20

func readPin(path string) (pinFile, error) {
	var pf pinFile
	f, err := os.Open(path)
	if err != nil {
		return pf, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return pf, err
	}
	if !fi.Mode().IsRegular() {
		return pf, fmt.Errorf("%s: not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxPinBytes+1))
	if err != nil {
		return pf, err
	}
	if len(b) > maxPinBytes {
		return pf, fmt.Errorf("%s: larger than %d bytes", path, maxPinBytes)
	}
	if err := json.Unmarshal(b, &pf); err != nil {
		return pf, fmt.Errorf("%s: %w", path, err)
	}
	return pf, nil
}

// writePin writes the pin file whole or not at all (a temporary file
// renamed over it), readable by the user only.
func writePin(path string, pf pinFile) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(pf, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".pin-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}
