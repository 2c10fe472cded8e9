package backend

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/sandbox"
)

// Options are one type of backend's own options: every key of a
// backend mapping but type, models, callTimeout, stallTimeout, billing and
// unpricedModel. A backend package
// declares them as a struct whose yaml tags name the options (an embedded
// struct tagged `yaml:",inline"` shares its keys); a pointer to it
// implements this interface. The loader decodes a mapping into it strictly
// (an unknown or mistyped option is refused by name), then validates it, and
// checks it against the machine for the backend a task runs on.
type Options interface {
	// Validate checks the values alone: what is wrong wherever they run.
	Validate() error
	// Check checks them against this machine before anything is spent:
	// files exist and are valid, commands are on the PATH, environment
	// variables are set. dir is the directory of the file that configured
	// the backend; relative paths are resolved against it.
	Check(dir string) error
}

// Types are the types of backend a file may name, each with a function
// returning a new value of its options with their defaults set. config
// never imports a driver; its caller (cmd/purser) gives it these.
type Types map[string]func() Options

// Names returns the type names, sorted.
func (bt Types) Names() []string { return slices.Sorted(maps.Keys(bt)) }

// OptionError is a problem with one option of a backend. The loader locates
// it in the file that set the option (or, for an option left at its default,
// at the backend's mapping).
type OptionError struct {
	Option string // the option's key, possibly with a path under it: "env.HOME", "command[0]"
	Msg    string
	Err    error // the underlying error, if any
}

func (e *OptionError) Error() string {
	if e.Option == "" {
		return e.Msg
	}
	return e.Option + ": " + e.Msg
}

func (e *OptionError) Unwrap() error { return e.Err }

// DecodeOptions gives a backend's New its options, validated, from
// spec.Options: either the options the loader decoded (a value of into's
// type, copied into it) or, from code that builds a spec by hand, a
// map[string]any of option to value, decoded strictly into into. Errors name
// the option.
func DecodeOptions(spec purser.BackendSpec, into Options) error {
	switch o := spec.Options.(type) {
	case nil:
	case map[string]any:
		var errs []error
		for _, p := range DecodeRaw(o, into, nil) {
			errs = append(errs, &OptionError{Option: p.Path, Msg: p.Msg})
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
	default:
		dst, src := reflect.ValueOf(into), reflect.ValueOf(spec.Options)
		switch {
		case src.Kind() == reflect.Pointer && src.IsNil():
		case src.Type() == dst.Type():
			dst.Elem().Set(src.Elem())
		case src.Type() == dst.Type().Elem():
			dst.Elem().Set(src)
		default:
			return fmt.Errorf("options of type %T given to a backend whose options are %T", spec.Options, into)
		}
	}
	return into.Validate()
}

// DecodeChecked is what a backend's New does with its options: decodes
// them as DecodeOptions does, then checks them against this machine
// (Options.Check, paths resolved against spec.Dir).
func DecodeChecked(spec purser.BackendSpec, into Options) error {
	if err := DecodeOptions(spec, into); err != nil {
		return err
	}
	return into.Check(spec.Dir)
}

// OptionProblem is an option DecodeRaw could not take. The config loader
// locates it in the file at Path under the backend's mapping.
type OptionProblem struct {
	Path string // under the backend mapping, e.g. "transcipt", "allowedTools[1]"
	Msg  string
}

// DecodeRaw decodes raw (as the YAML library decodes a mapping into
// map[string]any) into opts, a pointer to a struct, strictly: a key no
// yaml tag names is unknown, and a value must have its field's shape (the
// library itself would take 5 for a string and truncate 3.5 to an int).
// extraKnown are keys read elsewhere, listed with the known options.
func DecodeRaw(raw map[string]any, opts any, extraKnown []string) []OptionProblem {
	v := reflect.ValueOf(opts)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		// The backend's mistake, said plainly rather than panicked on.
		return []OptionProblem{{"", fmt.Sprintf("cannot be read: the backend's options are a %T, not a pointer to a struct", opts)}}
	}
	fields := map[string]reflect.Value{}
	collectFields(v.Elem(), fields)
	var problems []OptionProblem
	for _, key := range slices.Sorted(maps.Keys(raw)) {
		field, ok := fields[key]
		if !ok {
			known := slices.Sorted(slices.Values(append(slices.Collect(maps.Keys(fields)), extraKnown...)))
			problems = append(problems, OptionProblem{key, fmt.Sprintf("unknown option (known: %s)", strings.Join(known, ", "))})
			continue
		}
		problems = append(problems, assign(field, raw[key], key)...)
	}
	return problems
}

// collectFields maps each yaml key of the struct v to its field; embedded
// structs tagged inline contribute their own keys.
func collectFields(v reflect.Value, into map[string]reflect.Value) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, flags, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == "-":
		case f.Anonymous && f.Type.Kind() == reflect.Struct && (name == "" || strings.Contains(flags, "inline")):
			// The exported fields of an embedded struct are settable even
			// when its type is unexported.
			collectFields(v.Field(i), into)
		case !f.IsExported():
		default:
			if name == "" {
				name = strings.ToLower(f.Name[:1]) + f.Name[1:]
			}
			into[name] = v.Field(i)
		}
	}
}

var durationType = reflect.TypeFor[time.Duration]()

// assign stores v, as the YAML library decoded it, into dst, refusing a
// value of another shape.
func assign(dst reflect.Value, v any, path string) []OptionProblem {
	bad := func(want string) []OptionProblem {
		return []OptionProblem{{path, fmt.Sprintf("want %s, got %s", want, Describe(v))}}
	}
	if dst.Type() == durationType {
		s, ok := v.(string)
		d, err := time.ParseDuration(s)
		if !ok || err != nil || d <= 0 {
			return bad("a duration such as 90s or 20m")
		}
		dst.SetInt(int64(d))
		return nil
	}
	switch dst.Kind() {
	case reflect.String:
		s, ok := v.(string)
		if !ok {
			return bad("a string")
		}
		dst.SetString(s)
	case reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			return bad("true or false")
		}
		dst.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := asInt64(v)
		if !ok || dst.OverflowInt(n) {
			return bad("a whole number")
		}
		dst.SetInt(n)
	case reflect.Slice:
		list, ok := v.([]any)
		if !ok {
			return bad("a list")
		}
		out := reflect.MakeSlice(dst.Type(), len(list), len(list))
		var problems []OptionProblem
		for i, item := range list {
			problems = append(problems, assign(out.Index(i), item, fmt.Sprintf("%s[%d]", path, i))...)
		}
		dst.Set(out)
		return problems
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok || dst.Type().Key().Kind() != reflect.String {
			return bad("a mapping")
		}
		out := reflect.MakeMapWithSize(dst.Type(), len(m))
		var problems []OptionProblem
		for _, k := range slices.Sorted(maps.Keys(m)) {
			elem := reflect.New(dst.Type().Elem()).Elem()
			problems = append(problems, assign(elem, m[k], path+"."+k)...)
			out.SetMapIndex(reflect.ValueOf(k).Convert(dst.Type().Key()), elem)
		}
		dst.Set(out)
		return problems
	case reflect.Pointer:
		if v == nil {
			dst.SetZero()
			return nil
		}
		p := reflect.New(dst.Type().Elem())
		if problems := assign(p.Elem(), v, path); len(problems) > 0 {
			return problems
		}
		dst.Set(p)
	default:
		// A backend declared an option of a shape this decoder does not
		// know: the backend's mistake, said plainly rather than guessed at.
		return []OptionProblem{{path, fmt.Sprintf("cannot be read: options of Go type %s are not supported", dst.Type())}}
	}
	return nil
}

// asInt64 returns v as an int64 if it is an integer the YAML library
// decoded (it gives uint64 for positive and int64 for negative integers).
func asInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int64:
		return n, true
	case uint64:
		if n > math.MaxInt64 {
			return 0, false
		}
		return int64(n), true
	}
	return 0, false
}

// Describe says what a value the YAML library decoded is, for an error
// message: "the string \"x\"", "a list", "null".
func Describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("the string %q", x)
	case bool:
		return fmt.Sprint(x)
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	case float64, int, int64, uint64:
		return fmt.Sprint(x)
	}
	return fmt.Sprintf("%T", v)
}

// SandboxConfig is where and how a backend's agent is boxed: the sandbox:
// setting in force for it (its own, else the project's) and Homes, the
// directory under Purser's state directory for the project in which each
// task's HOME is made (outside every workspace, kept for resume).
type SandboxConfig struct {
	sandbox.Setting
	Homes string
}

// BoxSetting holds, embedded in a backend's options (tagged `yaml:"-"`), the
// sandbox: setting the loader gives them: it is Boxable's SetSandbox and
// Sandbox, the same for every boxable backend.
type BoxSetting struct {
	box SandboxConfig
}

// SetSandbox is given, by the loader, the sandbox: setting in force for the
// backend (its own, else the project's) and where boxes' HOMEs go.
func (s *BoxSetting) SetSandbox(c SandboxConfig) { s.box = c }

// Sandbox is the setting SetSandbox gave (off when never given).
func (s BoxSetting) Sandbox() SandboxConfig { return s.box }

// Boxable options are those of a backend whose agent can run in a box. The
// loader gives them the sandbox: setting in force; a backend whose options
// are not Boxable runs unboxed, and the loader refuses sandbox: on for it.
type Boxable interface {
	Options
	SetSandbox(SandboxConfig)
	Sandbox() SandboxConfig
}

// HasOption reports whether opts (a pointer to a struct, as DecodeRaw takes)
// declares the option key: how the loader tells a backend type's own
// sandbox: (Codex's sandbox mode) from Purser's box setting.
func HasOption(opts Options, key string) bool {
	v := reflect.ValueOf(opts)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return false
	}
	fields := map[string]reflect.Value{}
	collectFields(v.Elem(), fields)
	_, ok := fields[key]
	return ok
}
