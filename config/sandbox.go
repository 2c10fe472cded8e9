package config

import (
	"fmt"
	"path/filepath"

	"github.com/purser-dev/purser/backend"
	"github.com/purser-dev/purser/sandbox"
)

// BoxHomes is the directory, in Purser's state directory for the project at
// projectDir (beside its default database, outside every workspace), under
// which the boxes' HOMEs are made: one per task for its agent, one per
// workspace for its validators, kept for resume.
func BoxHomes(projectDir string) string {
	return filepath.Join(filepath.Dir(DefaultDatabase(projectDir)), "boxes")
}

// sandbox reads the project's sandbox: key.
func (p *Project) sandbox(v any) error {
	if v == nil {
		return nil
	}
	var errs []error
	p.Sandbox = p.doc.sandboxSetting("sandbox", v, p.Dir, &errs)
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// sandboxSetting reads a sandbox: value at field, adding what is wrong with
// it, located, to errs.
func (d *document) sandboxSetting(field string, v any, dir string, errs *[]error) sandbox.Setting {
	s, probs := sandbox.ParseSetting(v, dir)
	for _, p := range probs {
		at := field
		if p.Path != "" {
			at += "." + p.Path
		}
		*errs = append(*errs, d.at(at, p.Msg, nil))
	}
	return s
}

// boxBackend gives a backend's options the sandbox: setting in force for it
// (its own, else the project's, else sandbox.Default). A backend whose agent
// cannot be boxed (sim, openai: they call their model from inside Purser)
// runs in-process under the project's on, said or by default, as purser
// check says; its own sandbox: on is refused, rather than run unboxed
// against the user's word: fail closed.
func boxBackend(opts backend.Options, own sandbox.Setting, typ string, d *document, prefix string, proj *Project) error {
	var under sandbox.Setting
	var homes string
	if proj != nil {
		under = proj.Sandbox
		homes = BoxHomes(proj.Dir)
	}
	eff := own.Over(under).Resolved()
	if b, ok := opts.(backend.Boxable); ok {
		b.SetSandbox(backend.SandboxConfig{Setting: eff, Homes: homes})
		return nil
	}
	if own.Mode != sandbox.ModeOn {
		return nil
	}
	return d.at(prefix+"sandbox", fmt.Sprintf("backend type %s cannot run in a box yet (the box holds a process: the exec, agent, claude, codex and gemini backends and validators; this backend calls its model from inside Purser): set sandbox: off on this backend, or say nothing, to run it in-process", typ), nil)
}

// typesOwnSandbox reports whether a backend's sandbox: value v is its
// type's own option rather than Purser's box setting: Codex has a sandbox:
// of its own (read-only, workspace-write, danger-full-access). Their values
// do not overlap: off, on, true, false and a mapping are Purser's; any other
// string is the type's, where the type declares a sandbox option.
func (l Loader) typesOwnSandbox(typ, v any) bool {
	s, ok := v.(string)
	if !ok || s == "on" || s == "off" {
		return false
	}
	name, _ := typ.(string)
	if l.Backends == nil {
		return name == "codex" // options kept as written, for the type's New to read
	}
	newOpts := l.Backends[name]
	return newOpts != nil && backend.HasOption(newOpts(), "sandbox")
}
