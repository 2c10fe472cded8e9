package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/internal/yamlfile"
	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/sandbox"
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
	BudgetHint *bool `yaml:"budgetHint"`
	WrapUp     *bool `yaml:"wrapUp"`
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
	DrawFrom   []string        `yaml:"drawFrom"`
	SubAgents  *subAgentsFile  `yaml:"subAgents"`
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
	// Durability is what a committed ledger entry survives: "normal" (a
	// killed Purser; the default) or "full" (a power cut too).
	Durability string `yaml:"durability"`
	// Budgets is where the named budgets live (budgets:), when not the
	// user-level default.
	Budgets string               `yaml:"budgets"`
	Pricing string               `yaml:"pricing"`
	Prices  map[string]priceFile `yaml:"prices"`
	// Alerts are webhooks told when a budget needs someone.
	Alerts *alertsFile `yaml:"alerts"`
	// DrawFrom are named budgets every task of the project draws from.
	DrawFrom []string `yaml:"drawFrom"`
	// Sandbox is whether agents and validators run in a box (sandbox.go).
	Sandbox any `yaml:"sandbox"`
	// SubAgents caps the sub-agents of the project's tasks (subAgents:).
	SubAgents *subAgentsFile `yaml:"subAgents"`
	// Gateway is the door's shared service the project's lanes open on
	// (gateway.go).
	Gateway *gatewayFile `yaml:"gateway"`
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
	// Durability is purser.yaml's durability: "", "normal" or "full".
	Durability string
	// Budgets is purser.yaml's budgets: the database the named budgets
	// live in (absolute, or a postgres:// URL); "" when not said.
	Budgets string
	Prices  *pricing.Catalogue
	// Alerts is the alerts: section; nil when there is none.
	Alerts *Alerts
	// DrawFrom are the named budgets every task of the project draws from
	// (drawFrom:), by name.
	DrawFrom []string
	// Sandbox is the project's sandbox: (off when not said): the validators'
	// and, unless a backend says otherwise, every backend's.
	Sandbox sandbox.Setting
	// SubAgents caps the sub-agents of every task that says none itself
	// (subAgents:).
	SubAgents purser.SubAgentLimits
	// GatewaySocket is the door's shared service's socket (gateway.socket,
	// absolute); "" when lanes open in-process.
	GatewaySocket string

	doc *document // the file, to locate problems with its backends found later
}

// Loader reads task files and their project files (purser.yaml). With
// Backends, it checks backends' options as it reads them: every backend a
// file declares is decoded strictly and validated, and the backend a task
// runs on is also checked against this machine (backend.Options.Check), so
// that bad input is refused, located, before anything is recorded or spent.
// Without Backends, a backend's type is not checked and its options are kept
// as written (a map[string]any) for its New to decode: enough to find the
// project's database, not to run a task.
type Loader struct {
	Backends backend.Types
}

// FindProject walks up from dir to the nearest purser.yaml and loads it,
// without checking backends' options (see Loader). With none, it returns
// defaults rooted at dir.
func FindProject(dir string) (*Project, error) { return Loader{}.FindProject(dir) }

// LoadProject reads a purser.yaml without checking backends' options (see
// Loader).
func LoadProject(path string) (*Project, error) { return Loader{}.LoadProject(path) }

// FindProject walks up from dir to the nearest purser.yaml and loads it. With
// none, it returns defaults rooted at dir.
func (l Loader) FindProject(dir string) (*Project, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	for d := abs; ; d = filepath.Dir(d) {
		p := filepath.Join(d, ProjectFileName)
		if _, err := os.Stat(p); err == nil {
			return l.LoadProject(p)
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	return &Project{Dir: abs, Backends: map[string]purser.BackendSpec{}, Database: DefaultDatabase(abs), Prices: pricing.Builtin()}, nil
}

// LoadProject reads a purser.yaml: the file decoded, then the project's
// defaults (budget, degrade policy), its backends, its database, its alerts
// and named budgets, and its prices, each in turn.
func (l Loader) LoadProject(path string) (*Project, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	var pf projectFile
	d, err := decodeBudgeted(path, data, "budget.", &pf)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	p := &Project{File: path, Dir: dir, Backends: map[string]purser.BackendSpec{}, ModelTier: pf.ModelTier, Prices: pricing.Builtin(), doc: d}
	if err := p.defaults(&pf); err != nil {
		return nil, err
	}
	if err := p.sandbox(pf.Sandbox); err != nil {
		return nil, err
	}
	if err := p.gateway(pf.Gateway); err != nil {
		return nil, err
	}
	if err := l.projectBackends(p, pf.Backends); err != nil {
		return nil, err
	}
	if err := p.storage(&pf); err != nil {
		return nil, err
	}
	if pf.Alerts != nil {
		a, err := d.alerts(pf.Alerts)
		if err != nil {
			return nil, err
		}
		p.Alerts = a
	}
	if err := d.drawFrom(pf.DrawFrom); err != nil {
		return nil, err
	}
	p.DrawFrom = pf.DrawFrom
	if pf.SubAgents != nil {
		lim, errs := readSubAgents(d, *pf.SubAgents, "subAgents.")
		if len(errs) > 0 {
			return nil, errors.Join(errs...)
		}
		p.SubAgents = lim
	}
	if err := p.prices(&pf, data); err != nil {
		return nil, err
	}
	return p, nil
}

// defaults reads the budget and degrade policy the project's tasks default to.
func (p *Project) defaults(pf *projectFile) error {
	if pf.Budget != nil {
		if err := p.doc.validateBudget(*pf.Budget, "budget."); err != nil {
			return err
		}
		p.Budget = pf.Budget
	}
	if pf.Degrade != nil {
		pol, err := p.doc.degradePolicy(pf.Degrade, "degrade.")
		if err != nil {
			return err
		}
		p.Degrade = &pol
	}
	return nil
}

// projectBackends reads the backends: section, reporting every backend's
// problems together.
func (l Loader) projectBackends(p *Project, backends map[string]map[string]any) error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(backends)) {
		spec, err := l.backendSpec(p.doc, backends[name], "backends."+name+".", p.Dir, p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		spec.Name = name
		p.Backends[name] = spec
	}
	if len(errs) > 0 {
		return errors.Join(sortErrors(errs)...)
	}
	return nil
}

// storage reads where the ledger lives (database:, by default beside
// purser.yaml) and what a committed entry survives (durability:).
func (p *Project) storage(pf *projectFile) error {
	p.Database = DefaultDatabase(p.Dir)
	if pf.Database != "" {
		p.DatabaseSet = true
		p.Database = pf.Database
		if !strings.Contains(pf.Database, "://") { // a postgres:// URL is not a path
			p.Database = resolvePath(p.Dir, pf.Database)
		}
	}
	if p.Budgets = pf.Budgets; pf.Budgets != "" && !strings.Contains(pf.Budgets, "://") {
		p.Budgets = resolvePath(p.Dir, pf.Budgets)
	}
	switch pf.Durability {
	case "", "normal", "full":
		p.Durability = pf.Durability
	default:
		return p.doc.at("durability", fmt.Sprintf("want normal (survives Purser being killed) or full (survives a power cut too), got %q", pf.Durability), nil)
	}
	return nil
}

// prices lays over the built-in prices a LiteLLM catalogue (pricing:) and
// then the file's own (prices:); data is the file, to name it as their
// source.
func (p *Project) prices(pf *projectFile, data []byte) error {
	if pf.Pricing != "" {
		c, err := pricing.LoadLiteLLM(resolvePath(p.Dir, pf.Pricing))
		if err != nil {
			return p.doc.at("pricing", err.Error(), err)
		}
		p.Prices.Merge(c)
	}
	for model, pr := range pf.Prices {
		price, err := p.doc.price(model, pr)
		if err != nil {
			return err
		}
		p.Prices.Set(pricing.Entry{Model: model, Source: pricing.FileSource(p.File, data) + " (prices:)", Price: price})
	}
	return nil
}

// price reads one model's prices:, in dollars per million tokens: a
// cacheRead or cacheWrite left out is the input price, a cacheWrite1h left
// out is 0.
func (d *document) price(model string, pr priceFile) (pricing.Price, error) {
	if pr.Input == nil || pr.Output == nil {
		return pricing.Price{}, d.at("prices."+model, "want input and output, in dollars per million tokens", nil)
	}
	perMillion := map[string]pricing.PicoUSD{}
	for field, v := range map[string]*float64{"input": pr.Input, "output": pr.Output, "cacheRead": pr.CacheRead, "cacheWrite": pr.CacheWrite, "cacheWrite1h": pr.CacheWrite1h} {
		if v == nil {
			continue
		}
		if *v < 0 || *v > 1e6 {
			return pricing.Price{}, d.at("prices."+model+"."+field, "want dollars per million tokens, from 0 to 1000000", nil)
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
	return pricing.Price{Input: in, Output: perMillion["output"],
		CacheRead: given("cacheRead", in), CacheWrite: given("cacheWrite", in), CacheWrite1h: given("cacheWrite1h", 0)}, nil
}

func resolvePath(dir, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

var taskID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// LoadTask reads a task file, with the project's defaults under it.
func (l Loader) LoadTask(path string) (purser.Task, *Project, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return purser.Task{}, nil, err
	}
	proj, err := l.FindProject(filepath.Dir(abs))
	if err != nil {
		return purser.Task{}, nil, err
	}
	t, err := l.ParseTask(path, proj)
	return t, proj, err
}

// ParseTask reads a task file against a project: the file decoded, then each
// part of the task read in turn (identity, workspace, validators, backend,
// model tier, budget, degrade policy, named budgets), every problem found
// collected and reported together, in the file's order.
func (l Loader) ParseTask(path string, proj *Project) (purser.Task, error) {
	data, err := readFile(path)
	if err != nil {
		return purser.Task{}, err
	}
	var tf taskFile
	d, err := decodeBudgeted(path, data, "budget.", &tf)
	if err != nil {
		return purser.Task{}, err
	}
	abs, _ := filepath.Abs(path)
	r := &taskReader{l: l, d: d, tf: &tf, proj: proj, dir: filepath.Dir(abs)}
	r.t = purser.Task{ID: tf.ID, Goal: tf.Goal, Issue: tf.Issue, File: abs, ModelTier: tf.ModelTier,
		Planning: tf.Planning, SelfReview: tf.SelfReview, Degrade: purser.DefaultDegradePolicy()}
	r.identity()
	r.workspace()
	r.validators()
	r.backend()
	r.modelTier()
	r.budget()
	r.degrade()
	r.drawFrom()
	r.subAgents()
	if len(r.errs) > 0 {
		return purser.Task{}, errors.Join(sortErrors(r.errs)...)
	}
	return r.t, nil
}

// taskReader is one task file being read into a task: each step fills in
// its part of t and adds what it finds wrong to errs, so that one reading
// reports every problem; problems on the same line keep the steps' order.
type taskReader struct {
	l    Loader
	d    *document
	tf   *taskFile
	proj *Project
	dir  string // the task file's directory, which its paths are relative to
	t    purser.Task
	errs []error
}

// fail records a problem with field.
func (r *taskReader) fail(field, msg string) { r.errs = append(r.errs, r.d.at(field, msg, nil)) }

// identity checks the task's id and goal.
func (r *taskReader) identity() {
	switch {
	case r.tf.ID == "":
		r.fail("id", "is required")
	case !taskID.MatchString(r.tf.ID):
		r.fail("id", fmt.Sprintf("%q: want letters, digits, '.', '_' or '-', starting with a letter or digit, at most 128", r.tf.ID))
	}
	if strings.TrimSpace(r.tf.Goal) == "" {
		r.fail("goal", "is required")
	}
}

// workspace resolves the workspace against the task file's directory and
// checks it is a readable directory.
func (r *taskReader) workspace() {
	if r.tf.Workspace == "" {
		r.fail("workspace", "is required: the directory the agent works in, relative to this file")
		return
	}
	r.t.Workspace = resolvePath(r.dir, r.tf.Workspace)
	if msg := workspaceProblem(r.t.Workspace); msg != "" {
		r.fail("workspace", msg)
	}
}

// validators reads the validators: at least one, each named once, with a
// command and an optional timeout.
func (r *taskReader) validators() {
	if len(r.tf.Validators) == 0 {
		r.fail("validators", "at least one is required: a task is DONE when its validators pass")
	}
	names := map[string]bool{}
	for i, v := range r.tf.Validators {
		field := fmt.Sprintf("validators[%d]", i)
		val := purser.Validator{Name: v.Name, Run: v.Run}
		if v.Name == "" {
			r.fail(field+".name", "is required")
		} else if names[v.Name] {
			r.fail(field+".name", fmt.Sprintf("%q is used twice", v.Name))
		}
		names[v.Name] = true
		if strings.TrimSpace(v.Run) == "" {
			r.fail(field+".run", "is required: the command to run in the workspace")
		}
		if v.Timeout != "" {
			dur, err := time.ParseDuration(v.Timeout)
			if err != nil || dur <= 0 {
				r.fail(field+".timeout", fmt.Sprintf("%q: want a duration such as 30s or 5m", v.Timeout))
			}
			val.Timeout = dur
		}
		r.t.Validators = append(r.t.Validators, val)
	}
}

// backend resolves the task's backend (a name from purser.yaml, or a
// mapping of its own) and checks its options against this machine, each
// problem located where the backend was configured.
func (r *taskReader) backend() {
	// Where the task's backend was configured, to locate what its check finds.
	var backendDoc *document
	var backendPrefix string
	switch b := r.tf.Backend.(type) {
	case nil:
		r.fail("backend", "is required: a backend named in purser.yaml, or a mapping with type:")
	case string:
		spec, ok := r.proj.Backends[b]
		if ok {
			backendDoc, backendPrefix = r.proj.doc, "backends."+b+"."
		} else {
			r.fail("backend", fmt.Sprintf("%q is not a backend of the project (%s)", b, r.proj.backendsKnown()))
		}
		r.t.Backend = spec
	case map[string]any:
		spec, err := r.l.backendSpec(r.d, b, "backend.", r.dir, r.proj)
		if err != nil {
			r.errs = append(r.errs, err)
		} else {
			backendDoc, backendPrefix = r.d, "backend."
		}
		spec.Name = spec.Type
		r.t.Backend = spec
	default:
		r.fail("backend", "want a backend name or a mapping with type:")
	}

	if opts, ok := r.t.Backend.Options.(backend.Options); ok && backendDoc != nil {
		if err := opts.Check(r.t.Backend.Dir); err != nil {
			r.errs = append(r.errs, backendDoc.optionErrors(backendPrefix, err))
		}
	}
}

// backendsKnown says, for a task naming a backend the project lacks, which
// backends it has and where.
func (p *Project) backendsKnown() string {
	if p.File == "" {
		return "no purser.yaml was found"
	}
	known := make([]string, 0, len(p.Backends))
	for n := range p.Backends {
		known = append(known, n)
	}
	slices.Sort(known)
	return "known in " + p.File + ": " + strings.Join(known, ", ")
}

// modelTier defaults the model tier (the task's, else the project's, else
// standard) and checks the backend has it.
func (r *taskReader) modelTier() {
	if r.t.ModelTier == "" {
		r.t.ModelTier = r.proj.ModelTier
	}
	if r.t.ModelTier == "" {
		r.t.ModelTier = "standard"
	}
	if len(r.t.Backend.Models) > 0 {
		if _, ok := r.t.Backend.Model(r.t.ModelTier); !ok {
			r.fail("modelTier", fmt.Sprintf("%q is not a model tier of backend %s (it has: %s)", r.t.ModelTier, r.t.Backend.Name, strings.Join(sortedKeys(r.t.Backend.Models), ", ")))
		}
	}
}

// budget takes the task's budget, else the project's, and refuses one a
// subscription backend would leave unenforced.
func (r *taskReader) budget() {
	switch {
	case r.tf.Budget != nil:
		if err := r.d.validateBudget(*r.tf.Budget, "budget."); err != nil {
			r.errs = append(r.errs, err)
		}
		r.t.Budget = *r.tf.Budget
	case r.proj.Budget != nil:
		r.t.Budget = *r.proj.Budget
	default:
		r.fail("budget", "is required here or in purser.yaml: at least hard.maxIterations")
	}
	if err := subscriptionBudget(r.t, r.tf.Budget != nil, r.d, r.proj.doc); err != nil {
		r.errs = append(r.errs, err)
	}
}

// degrade takes the task's degrade policy, else the project's, else the
// default one.
func (r *taskReader) degrade() {
	if r.proj.Degrade != nil {
		r.t.Degrade = *r.proj.Degrade
	}
	if r.tf.Degrade != nil {
		pol, err := r.d.degradePolicy(r.tf.Degrade, "degrade.")
		if err != nil {
			r.errs = append(r.errs, err)
		}
		r.t.Degrade = pol
	}
}

// drawFrom checks the task's named budgets and adds the project's.
func (r *taskReader) drawFrom() {
	if err := r.d.drawFrom(r.tf.DrawFrom); err != nil {
		r.errs = append(r.errs, err)
	}
	// The project's budgets and the task's: a task cannot opt out of the
	// budgets its project draws from.
	r.t.DrawFrom = slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(r.proj.DrawFrom), r.tf.DrawFrom...))))
	if len(r.t.DrawFrom) == 0 {
		r.t.DrawFrom = nil
	}
}

// drawFrom checks a drawFrom: list of named budgets: each a valid budget
// name, none twice. Whether each exists is the store's to say, when the
// task is run or submitted.
func (d *document) drawFrom(names []string) error {
	seen := map[string]bool{}
	for i, n := range names {
		field := fmt.Sprintf("drawFrom[%d]", i)
		if err := purser.ValidateBudgetName(n); err != nil {
			return d.at(field, "want the name of a named budget (purser budgets create): "+err.Error(), nil)
		}
		if seen[n] {
			return d.at(field, fmt.Sprintf("%q is listed twice", n), nil)
		}
		seen[n] = true
	}
	return nil
}

// subscriptionBudget refuses a task on a subscription backend whose budget
// caps money and nothing else but iterations. Its dollars are list prices,
// never checked against a money cap, so that cap would never act: the user
// believes the task has a money stop and it has none. This is an error, not a
// warning, because the fix is the user's to choose (cap tokens or time, which
// do steer such a task, or bill the backend as api) and a silently unenforced
// cap is what Purser exists to prevent. A money cap beside a token or time cap
// only warns (see SubscriptionWarning): the task is still bounded.
func subscriptionBudget(t purser.Task, inTask bool, task, proj *document) error {
	h := t.Budget.Hard
	if !t.Backend.Subscription() || h.USD == nil || h.Tokens != nil || h.TimeMinutes != nil {
		return nil
	}
	d := task
	if !inTask && proj != nil {
		d = proj
	}
	return d.at("budget.hard.usd", fmt.Sprintf("backend %s bills by subscription (billing: subscription): its dollars are list prices, "+
		"never summed into money spent nor checked against a money cap, so this budget's only cap but maxIterations would not be enforced; "+
		"cap hard.tokens or hard.timeMinutes (they steer a task on a plan), or set billing: api on the backend if it is paid per token", t.Backend.Name), nil)
}

// SubscriptionWarning says, for a task on a subscription backend whose budget
// sets money thresholds beside a token or time cap, that those thresholds
// are not enforced; "" otherwise.
func SubscriptionWarning(t purser.Task) string {
	if !t.Backend.Subscription() {
		return ""
	}
	b := t.Budget
	if b.Hard.USD == nil && b.Optimal.USD == nil && b.Warning.USD == nil {
		return ""
	}
	return fmt.Sprintf("warning: task %s: backend %s bills by subscription: its dollars are list prices, recorded as list and never checked against the budget's money thresholds (not enforced); tokens, time and iterations steer the task",
		t.ID, t.Backend.Name)
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// backendSpec reads a backend mapping: type, models, callTimeout,
// stallTimeout, billing, unpricedModel, and the type's own options, decoded
// strictly and validated when the loader knows the type.
func (l Loader) backendSpec(d *document, raw map[string]any, prefix, dir string, proj *Project) (purser.BackendSpec, error) {
	spec := purser.BackendSpec{Models: map[string]string{}, Dir: dir}
	var errs []error
	fail := func(field, msg string) { errs = append(errs, d.at(prefix+field, msg, nil)) }
	own := map[string]any{}
	var box sandbox.Setting
	for k, v := range raw {
		if k == "sandbox" && !l.typesOwnSandbox(raw["type"], v) {
			box = d.sandboxSetting(prefix+"sandbox", v, dir, &errs)
			continue
		}
		if !l.commonKey(&spec, k, v, fail) {
			own[k] = v
		}
	}
	if _, ok := raw["type"]; !ok {
		fail("type", "is required: one of "+l.typeList())
	}
	if len(errs) > 0 {
		return spec, errors.Join(sortErrors(errs)...)
	}
	if l.Backends == nil {
		spec.Options = own
		return spec, nil
	}
	opts := l.Backends[spec.Type]()
	for _, p := range backend.DecodeRaw(own, opts, commonBackendKeys) {
		errs = append(errs, d.at(strings.TrimSuffix(prefix+p.Path, "."), p.Msg, nil))
	}
	if len(errs) > 0 {
		return spec, errors.Join(sortErrors(errs)...)
	}
	if err := opts.Validate(); err != nil {
		return spec, d.optionErrors(prefix, err)
	}
	if err := boxBackend(opts, box, spec.Type, d, prefix, proj); err != nil {
		return spec, err
	}
	spec.Options = opts
	return spec, nil
}

// commonKey reads key k of a backend mapping into spec when it is one that
// every backend takes (commonBackendKeys), and reports whether it was.
func (l Loader) commonKey(spec *purser.BackendSpec, k string, v any, fail func(field, msg string)) bool {
	switch k {
	case "type":
		s, ok := v.(string)
		switch {
		case !ok || s == "":
			fail("type", "want a backend type such as "+l.typeList())
		case l.Backends != nil && l.Backends[s] == nil:
			fail("type", fmt.Sprintf("%q is not a backend type (known: %s)", s, l.typeList()))
		default:
			spec.Type = s
		}
	case "callTimeout":
		str, _ := v.(string)
		dur, err := time.ParseDuration(str)
		if err != nil || dur <= 0 {
			fail("callTimeout", fmt.Sprintf("%v: want a duration such as 90s or 20m", v))
		}
		spec.CallTimeout = dur
	case "billing":
		str, _ := v.(string)
		switch purser.Billing(str) {
		case purser.BillingAPI, purser.BillingSubscription:
			spec.Billing = purser.Billing(str)
		default:
			fail("billing", fmt.Sprintf("%s: want api (the default: its dollars are money spent) or subscription (a flat-rate plan: its dollars are list prices, never checked against a money cap)", backend.Describe(v)))
		}
	case "unpricedModel":
		str, _ := v.(string)
		switch str {
		case "refuse":
		case "allow":
			spec.AllowUnpriced = true
		default:
			fail("unpricedModel", fmt.Sprintf("%s: want refuse (the default: a call on a model with no price is refused where only a money cap would bound it) or allow", backend.Describe(v)))
		}
	case "stallTimeout":
		str, _ := v.(string)
		if str == "off" {
			spec.StallTimeout = -1
			return true
		}
		dur, err := time.ParseDuration(str)
		if err != nil || dur <= 0 {
			fail("stallTimeout", fmt.Sprintf("%v: want a duration such as 120s or 5m, or off", v))
		}
		spec.StallTimeout = dur
	case "models":
		m, ok := v.(map[string]any)
		if !ok {
			fail("models", "want a mapping of tier to model, e.g. {cheap: …, standard: …}")
		}
		for tier, model := range m {
			s, ok := model.(string)
			if !ok || s == "" {
				fail("models."+tier, "want a model name")
			}
			spec.Models[tier] = s
		}
	default:
		return false
	}
	return true
}

// typeList names the backend types a file may use.
func (l Loader) typeList() string {
	if l.Backends == nil {
		return "sim, claude, codex, gemini, openai or exec"
	}
	return strings.Join(l.Backends.Names(), ", ")
}

// optionErrors locates the problems a backend's options reported: an
// *OptionError at its option under prefix, anything else at the backend.
func (d *document) optionErrors(prefix string, err error) error {
	var out []error
	for _, e := range unjoin(err) {
		var oe *backend.OptionError
		if errors.As(e, &oe) {
			out = append(out, d.at(prefix+oe.Option, oe.Msg, e))
			continue
		}
		out = append(out, d.at(strings.TrimSuffix(prefix, "."), e.Error(), e))
	}
	return errors.Join(sortErrors(out)...)
}

// workspaceProblem says what is wrong with a workspace directory, or "".
func workspaceProblem(path string) string {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("%s does not exist", path)
	case err != nil:
		return fmt.Sprintf("%s cannot be read: %v", path, err)
	case !fi.IsDir():
		return fmt.Sprintf("%s is not a directory", path)
	}
	f, err := os.Open(path)
	if err == nil {
		_, err = f.ReadDir(1)
		f.Close()
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Sprintf("%s cannot be read: %v", path, err)
	}
	return ""
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
	if f.BudgetHint != nil {
		pol.BudgetHint = *f.BudgetHint
	}
	if f.WrapUp != nil {
		pol.WrapUp = *f.WrapUp
	}
	return pol, nil
}

// DecodeFile reads a YAML or JSON file strictly into v: unknown keys are
// refused by name, and errors carry file, line and column.
func DecodeFile(path string, v any) error { return yamlfile.DecodeFile(path, v) }

// FieldError returns an *Error for a field of a file, located when possible.
func FieldError(path, field, msg string) error { return yamlfile.FieldError(path, field, msg) }
