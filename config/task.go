package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/pricing"
)

// ProjectFileName is the project file found by walking up from a task file.
const ProjectFileName = "purser.yaml"

// degradeFile is the written form of a degrade policy.
type degradeFile struct {
	Actions       []any `yaml:"actions"`
	ShrinkContext *struct {
		Strategy  string `yaml:"strategy"`
		MaxTokens *int   `yaml:"maxTokens"`
	} `yaml:"shrinkContext"`
}

type validatorFile struct {
	Name    string `yaml:"name"`
	Run     string `yaml:"run"`
	Timeout string `yaml:"timeout"`
}

type taskFile struct {
	ID         string          `yaml:"id"`
	Goal       string          `yaml:"goal"`
	Issue      string          `yaml:"issue"`
	Workspace  string          `yaml:"workspace"`
	Backend    any             `yaml:"backend"`
	ModelTier  string          `yaml:"modelTier"`
	Planning   bool            `yaml:"planning"`
	SelfReview bool            `yaml:"selfReview"`
	Validators []validatorFile `yaml:"validators"`
	Budget     *budget.Config  `yaml:"budget"`
	Degrade    *degradeFile    `yaml:"degrade"`
}

// priceFile is one model's prices in purser.yaml, dollars per million
// tokens. Pointers tell "not given" from 0: a cache price left out is the
// input price, a cache price of 0 is free.
type priceFile struct {
	Input        *float64 `yaml:"input"`
	Output       *float64 `yaml:"output"`
	CacheRead    *float64 `yaml:"cacheRead"`
	CacheWrite   *float64 `yaml:"cacheWrite"`
	CacheWrite1h *float64 `yaml:"cacheWrite1h"`
}

type projectFile struct {
	Backends  map[string]map[string]any `yaml:"backends"`
	Budget    *budget.Config            `yaml:"budget"`
	Degrade   *degradeFile              `yaml:"degrade"`
	ModelTier string                    `yaml:"modelTier"`
	Database  string                    `yaml:"database"`
	Pricing   string                    `yaml:"pricing"`
	Prices    map[string]priceFile      `yaml:"prices"`
}

// Project is what purser.yaml holds: project-level defaults.
type Project struct {
	File      string // "" when there is none
	Dir       string
	Backends  map[string]purser.BackendSpec
	Budget    *budget.Config
	Degrade   *purser.DegradePolicy
	ModelTier string
	Database  string // absolute
	// DatabaseSet is true when purser.yaml names the database (database:).
	DatabaseSet bool
	Prices      *pricing.Catalogue
}

// FindProject walks up from dir to the nearest purser.yaml and loads it. With
// none, it returns defaults rooted at dir.
func FindProject(dir string) (*Project, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	for d := abs; ; d = filepath.Dir(d) {
		p := filepath.Join(d, ProjectFileName)
		if _, err := os.Stat(p); err == nil {
			return LoadProject(p)
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	return &Project{Dir: abs, Backends: map[string]purser.BackendSpec{}, Database: DefaultDatabase(abs), Prices: pricing.Builtin()}, nil
}

// LoadProject reads a purser.yaml.
func LoadProject(path string) (*Project, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	d, err := parse(path, data)
	if err != nil {
		return nil, err
	}
	if err := d.checkNumbers("budget.", budgetNumbers); err != nil {
		return nil, err
	}
	var pf projectFile
	if err := d.decode(&pf); err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	p := &Project{File: path, Dir: dir, Backends: map[string]purser.BackendSpec{}, ModelTier: pf.ModelTier, Prices: pricing.Builtin()}
	if pf.Budget != nil {
		if err := d.validateBudget(*pf.Budget, "budget."); err != nil {
			return nil, err
		}
		p.Budget = pf.Budget
	}
	if pf.Degrade != nil {
		pol, err := d.degradePolicy(pf.Degrade, "degrade.")
		if err != nil {
			return nil, err
		}
		p.Degrade = &pol
	}
	for name, raw := range pf.Backends {
		spec, err := d.backendSpec(raw, "backends."+name+".", dir)
		if err != nil {
			return nil, err
		}
		spec.Name = name
		p.Backends[name] = spec
	}
	p.Database = DefaultDatabase(dir)
	if pf.Database != "" {
		p.DatabaseSet = true
		p.Database = resolvePath(dir, pf.Database)
	}
	if pf.Pricing != "" {
		c, err := pricing.LoadLiteLLM(resolvePath(dir, pf.Pricing))
		if err != nil {
			return nil, d.at("pricing", err.Error(), err)
		}
		p.Prices.Merge(c)
	}
	for model, pr := range pf.Prices {
		if pr.Input == nil || pr.Output == nil {
			return nil, d.at("prices."+model, "want input and output, in dollars per million tokens", nil)
		}
		perMillion := map[string]pricing.PicoUSD{}
		for field, v := range map[string]*float64{"input": pr.Input, "output": pr.Output, "cacheRead": pr.CacheRead, "cacheWrite": pr.CacheWrite, "cacheWrite1h": pr.CacheWrite1h} {
			if v == nil {
				continue
			}
			if *v < 0 || *v > 1e6 {
				return nil, d.at("prices."+model+"."+field, "want dollars per million tokens, from 0 to 1000000", nil)
			}
			perMillion[field] = pricing.PerMillion(*v)
		}
		given := func(field string, fallback pricing.PicoUSD) pricing.PicoUSD {
			if v, ok := perMillion[field]; ok {
				return v
			}
			return fallback
		}
		in := perMillion["input"]
		p.Prices.Set(pricing.Entry{Model: model, Source: pricing.FileSource(path, data) + " (prices:)", Price: pricing.Price{Input: in, Output: perMillion["output"],
			CacheRead: given("cacheRead", in), CacheWrite: given("cacheWrite", in), CacheWrite1h: given("cacheWrite1h", 0)}})
	}
	return p, nil
}

func resolvePath(dir, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

var taskID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// LoadTask reads a task file, with the project's defaults under it.
func LoadTask(path string) (purser.Task, *Project, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return purser.Task{}, nil, err
	}
	proj, err := FindProject(filepath.Dir(abs))
	if err != nil {
		return purser.Task{}, nil, err
	}
	t, err := ParseTask(path, proj)
	return t, proj, err
}

// ParseTask reads a task file against a project.
func ParseTask(path string, proj *Project) (purser.Task, error) {
	data, err := readFile(path)
	if err != nil {
		return purser.Task{}, err
	}
	d, err := parse(path, data)
	if err != nil {
		return purser.Task{}, err
	}
	if err := d.checkNumbers("budget.", budgetNumbers); err != nil {
		return purser.Task{}, err
	}
	var tf taskFile
	if err := d.decode(&tf); err != nil {
		return purser.Task{}, err
	}
	abs, _ := filepath.Abs(path)
	dir := filepath.Dir(abs)
	t := purser.Task{ID: tf.ID, Goal: tf.Goal, Issue: tf.Issue, File: abs, ModelTier: tf.ModelTier,
		Planning: tf.Planning, SelfReview: tf.SelfReview, Degrade: purser.DefaultDegradePolicy()}
	var errs []error
	fail := func(field, msg string) { errs = append(errs, d.at(field, msg, nil)) }

	switch {
	case tf.ID == "":
		fail("id", "is required")
	case !taskID.MatchString(tf.ID):
		fail("id", fmt.Sprintf("%q: want letters, digits, '.', '_' or '-', starting with a letter or digit, at most 128", tf.ID))
	}
	if strings.TrimSpace(tf.Goal) == "" {
		fail("goal", "is required")
	}
	if tf.Workspace == "" {
		fail("workspace", "is required: the directory the agent works in, relative to this file")
	} else {
		t.Workspace = resolvePath(dir, tf.Workspace)
		if fi, err := os.Stat(t.Workspace); err != nil || !fi.IsDir() {
			fail("workspace", fmt.Sprintf("%s is not a directory", t.Workspace))
		}
	}
	if len(tf.Validators) == 0 {
		fail("validators", "at least one is required: a task is DONE when its validators pass")
	}
	names := map[string]bool{}
	for i, v := range tf.Validators {
		field := fmt.Sprintf("validators[%d]", i)
		val := purser.Validator{Name: v.Name, Run: v.Run}
		if v.Name == "" {
			fail(field+".name", "is required")
		} else if names[v.Name] {
			fail(field+".name", fmt.Sprintf("%q is used twice", v.Name))
		}
		names[v.Name] = true
		if strings.TrimSpace(v.Run) == "" {
			fail(field+".run", "is required: the command to run in the workspace")
		}
		if v.Timeout != "" {
			dur, err := time.ParseDuration(v.Timeout)
			if err != nil || dur <= 0 {
				fail(field+".timeout", fmt.Sprintf("%q: want a duration such as 30s or 5m", v.Timeout))
			}
			val.Timeout = dur
		}
		t.Validators = append(t.Validators, val)
	}

	switch b := tf.Backend.(type) {
	case nil:
		fail("backend", "is required: a backend named in purser.yaml, or a mapping with type:")
	case string:
		spec, ok := proj.Backends[b]
		if !ok {
			known := make([]string, 0, len(proj.Backends))
			for n := range proj.Backends {
				known = append(known, n)
			}
			slices.Sort(known)
			where := "no purser.yaml was found"
			if proj.File != "" {
				where = "known in " + proj.File + ": " + strings.Join(known, ", ")
			}
			fail("backend", fmt.Sprintf("%q is not a backend of the project (%s)", b, where))
		}
		t.Backend = spec
	case map[string]any:
		spec, err := d.backendSpec(b, "backend.", dir)
		if err != nil {
			errs = append(errs, err)
		}
		spec.Name = spec.Type
		t.Backend = spec
	default:
		fail("backend", "want a backend name or a mapping with type:")
	}

	if t.ModelTier == "" {
		t.ModelTier = proj.ModelTier
	}
	if t.ModelTier == "" {
		t.ModelTier = "standard"
	}
	if len(t.Backend.Models) > 0 {
		if _, ok := t.Backend.Model(t.ModelTier); !ok {
			fail("modelTier", fmt.Sprintf("%q is not a model tier of backend %s (it has: %s)", t.ModelTier, t.Backend.Name, strings.Join(sortedKeys(t.Backend.Models), ", ")))
		}
	}

	switch {
	case tf.Budget != nil:
		if err := d.validateBudget(*tf.Budget, "budget."); err != nil {
			errs = append(errs, err)
		}
		t.Budget = *tf.Budget
	case proj.Budget != nil:
		t.Budget = *proj.Budget
	default:
		fail("budget", "is required here or in purser.yaml: at least hard.maxIterations")
	}

	if proj.Degrade != nil {
		t.Degrade = *proj.Degrade
	}
	if tf.Degrade != nil {
		pol, err := d.degradePolicy(tf.Degrade, "degrade.")
		if err != nil {
			errs = append(errs, err)
		}
		t.Degrade = pol
	}
	if len(errs) > 0 {
		return purser.Task{}, errors.Join(sortErrors(errs)...)
	}
	return t, nil
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// backendSpec reads a backend mapping: type, models, and the type's own
// options.
func (d *document) backendSpec(raw map[string]any, prefix, dir string) (purser.BackendSpec, error) {
	spec := purser.BackendSpec{Models: map[string]string{}, Options: map[string]any{}, Dir: dir}
	for k, v := range raw {
		switch k {
		case "type":
			s, ok := v.(string)
			if !ok || s == "" {
				return spec, d.at(prefix+"type", "want a backend type such as sim, claude, codex, openai or exec", nil)
			}
			spec.Type = s
		case "callTimeout":
			str, _ := v.(string)
			dur, err := time.ParseDuration(str)
			if err != nil || dur <= 0 {
				return spec, d.at(prefix+"callTimeout", fmt.Sprintf("%v: want a duration such as 90s or 20m", v), nil)
			}
			spec.CallTimeout = dur
		case "models":
			m, ok := v.(map[string]any)
			if !ok {
				return spec, d.at(prefix+"models", "want a mapping of tier to model, e.g. {cheap: …, standard: …}", nil)
			}
			for tier, model := range m {
				s, ok := model.(string)
				if !ok || s == "" {
					return spec, d.at(prefix+"models."+tier, "want a model name", nil)
				}
				spec.Models[tier] = s
			}
		default:
			spec.Options[k] = v
		}
	}
	if spec.Type == "" {
		return spec, d.at(prefix+"type", "is required", nil)
	}
	return spec, nil
}

// degradePolicy reads a degrade policy: actions as names or
// {action: name, at: warning}, and shrinkContext.
func (d *document) degradePolicy(f *degradeFile, prefix string) (purser.DegradePolicy, error) {
	pol := purser.DefaultDegradePolicy()
	if f.Actions != nil {
		pol.Steps = []purser.DegradeStep{}
	}
	for i, a := range f.Actions {
		field := fmt.Sprintf("%sactions[%d]", prefix, i)
		var step purser.DegradeStep
		switch v := a.(type) {
		case string:
			step.Action = purser.DegradeAction(v)
		case map[string]any:
			for k, x := range v {
				s, _ := x.(string)
				switch k {
				case "action":
					step.Action = purser.DegradeAction(s)
				case "at":
					if s != "warning" {
						return pol, d.at(field+".at", fmt.Sprintf("%q: the only stage is warning (leave it out to apply on entering WARNING)", s), nil)
					}
					step.At = purser.AtWarningLine
				default:
					return pol, d.at(field, fmt.Sprintf("unknown field %q (want action, at)", k), nil)
				}
			}
		default:
			return pol, d.at(field, "want an action name or {action: NAME, at: warning}", nil)
		}
		if !slices.Contains(purser.KnownDegradeActions, step.Action) {
			known := make([]string, len(purser.KnownDegradeActions))
			for j, k := range purser.KnownDegradeActions {
				known[j] = string(k)
			}
			return pol, d.at(field, fmt.Sprintf("unknown degrade action %q (known: %s)", step.Action, strings.Join(known, ", ")), nil)
		}
		pol.Steps = append(pol.Steps, step)
	}
	if s := f.ShrinkContext; s != nil {
		if s.Strategy != "" {
			pol.Shrink.Strategy = s.Strategy
		}
		if s.MaxTokens != nil {
			if *s.MaxTokens < 1 {
				return pol, d.at(prefix+"shrinkContext.maxTokens", "must be at least 1", nil)
			}
			pol.Shrink.MaxTokens = *s.MaxTokens
		}
	}
	return pol, nil
}

// DecodeFile reads a YAML or JSON file strictly into v: unknown keys are
// refused by name, and errors carry file, line and column.
func DecodeFile(path string, v any) error {
	data, err := readFile(path)
	if err != nil {
		return err
	}
	d, err := parse(path, data)
	if err != nil {
		return err
	}
	return d.decode(v)
}

// FieldError returns an *Error for a field of a file, located when possible.
func FieldError(path, field, msg string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return &Error{File: path, Field: field, Msg: msg}
	}
	d, err := parse(path, data)
	if err != nil {
		return &Error{File: path, Field: field, Msg: msg}
	}
	return d.at(field, msg, nil)
}
