package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Load layers the defaults, the YAML file (--config or NDBGATE_CONFIG),
// NDBGATE_* variables and flags, the last winning, and validates the result.
// name is the command, for --help; flag errors, help and a notice per
// deprecated setting name used go to out, and --help returns flag.ErrHelp.
func Load(name string, args []string, lookup func(string) (string, bool), out io.Writer) (Config, error) {
	cfg := Default()
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() { WriteHelp(out, name) }
	file := fs.String(configFlag, "", "")
	given := map[string]string{} // flag name: its last value, applied after env
	for _, s := range settings {
		for _, f := range []string{s.Flag, s.Old.Flag} {
			if f != "" && fs.Lookup(f) == nil {
				fs.Var(&flagValue{name: f, given: given}, f, s.Help)
			}
		}
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	path := *file
	if path == "" {
		path, _ = lookup(configEnv)
	}
	// Deprecated names used: one notice each, once the sources are read.
	var notices []string
	defer func() {
		for _, n := range notices {
			fmt.Fprintln(out, n)
		}
	}()
	if path != "" {
		if err := cfg.loadFile(path, &notices); err != nil {
			return cfg, err
		}
	}
	if err := cfg.applyEnv(lookup, &notices); err != nil {
		return cfg, err
	}
	var errs []error
	for i := range settings {
		s := &settings[i]
		v, ok, err := pick(s, flagName(s.Flag), flagName(s.Old.Flag), func(n string) (string, bool) {
			v, ok := given[strings.TrimPrefix(n, "--")]
			return v, ok
		}, &notices)
		if err != nil {
			errs = append(errs, err)
		} else if ok {
			_ = parse(s.Field(&cfg), v) // checked when parsed
		}
	}
	if err := errors.Join(errs...); err != nil {
		return cfg, err
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("invalid configuration:\n%w", err)
	}
	return cfg, nil
}

// flagValue records a flag's text for Load to apply after the environment,
// having checked that it parses for every setting the flag sets.
type flagValue struct {
	name  string
	given map[string]string
}

func (f *flagValue) String() string { return "" }

func (f *flagValue) Set(v string) error {
	var scratch Config
	for _, s := range settings {
		if s.hasFlag(f.name) {
			if err := parse(s.Field(&scratch), v); err != nil {
				return err
			}
		}
	}
	f.given[f.name] = v
	return nil
}

// IsBoolFlag lets a boolean flag stand alone (--api-tls).
func (f *flagValue) IsBoolFlag() bool {
	for _, s := range settings {
		if s.hasFlag(f.name) {
			return typeName(s.Field(&Config{})) == "bool"
		}
	}
	return false
}

// flagName is how messages write a flag: --name, or "" for none.
func flagName(name string) string {
	if name == "" {
		return ""
	}
	return "--" + name
}

// hasFlag reports whether the flag name sets s, by its name or its old one.
func (s *setting) hasFlag(name string) bool {
	return name != "" && (s.Flag == name || s.Old.Flag == name)
}

// WriteHelp writes `ndbgate <name> --help`: every flag, then the settings
// that only YAML sets.
func WriteHelp(w io.Writer, name string) {
	fmt.Fprintf(w, `usage: ndbgate %s [flags]

Each setting is read from the YAML file, then its NDBGATE_* variable, then its
flag; the last wins. Sizes take k, m or g (64k, 1m); durations 250ms, 1s.

  --%s string
        YAML config file
        env %s
`, name, configFlag, configEnv)
	var c Config
	done := map[string]bool{}
	for _, s := range settings {
		if s.Flag == "" || done[s.Flag] {
			continue
		}
		done[s.Flag] = true
		var keys []string
		for _, o := range settings {
			if o.Flag == s.Flag {
				keys = append(keys, o.Key)
			}
		}
		arg := " " + typeName(s.Field(&c))
		if arg == " bool" {
			arg = ""
		}
		fmt.Fprintf(w, "  --%s%s\n        %s\n        %s\n", s.Flag, arg, s.Help, sources(keys, s.Env, s.Default, s.Old))
	}
	fmt.Fprintf(w, "\nSettings of the YAML file only (and its lists: tables, containers, key_prefixes):\n")
	for _, s := range settings {
		if s.Flag == "" {
			fmt.Fprintf(w, "  %s %s\n        %s\n        %s\n", s.Key, typeName(s.Field(&c)), s.Help, sources(nil, s.Env, s.Default, s.Old))
		}
	}
}

func sources(keys []string, env, def string, old names) string {
	var parts []string
	if len(keys) > 0 {
		parts = append(parts, "yaml "+strings.Join(keys, ", "))
	}
	if env != "" {
		parts = append(parts, "env "+env)
	}
	if def != "" {
		parts = append(parts, "default "+def)
	}
	var was []string
	for _, n := range []string{old.Key, old.Env, flagName(old.Flag)} {
		if n != "" {
			was = append(was, n)
		}
	}
	if len(was) > 0 {
		parts = append(parts, "deprecated name "+strings.Join(was, ", "))
	}
	return strings.Join(parts, "; ")
}

// ApplyEnv merges NDBGATE_* variables from lookup (os.LookupEnv in
// production), naming every variable that does not parse.
func (c *Config) ApplyEnv(lookup func(string) (string, bool)) error {
	return c.applyEnv(lookup, new([]string))
}

// applyEnv is ApplyEnv, noting the deprecated names it meets.
func (c *Config) applyEnv(lookup func(string) (string, bool), notices *[]string) error {
	var errs []error
	for i := range settings {
		s := &settings[i]
		v, ok, err := pick(s, s.Env, s.Old.Env, lookup, notices)
		if err != nil {
			errs = append(errs, fmt.Errorf("environment: %w", err))
			continue
		}
		if ok {
			if err := parse(s.Field(c), v); err != nil {
				errs = append(errs, fmt.Errorf("environment %s=%q: %w", envName(s, lookup), v, err))
			}
		}
	}
	return errors.Join(errs...)
}

// envName is the variable that gave s its value: its own, else its old one.
func envName(s *setting, lookup func(string) (string, bool)) string {
	if _, ok := lookup(s.Env); ok || s.Old.Env == "" {
		return s.Env
	}
	return s.Old.Env
}

// LoadFile merges a YAML file over c. Unknown keys are an error, so that a
// typo does not silently fall back to a default.
func (c *Config) LoadFile(path string) error {
	return c.loadFile(path, new([]string))
}

// loadFile is LoadFile, noting the deprecated names it meets.
func (c *Config) loadFile(path string, notices *[]string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	if len(doc.Content) == 0 { // an empty file
		return nil
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return fmt.Errorf("config file %s: line %d: want a mapping of settings (listeners:, memcache:, ...)", path, top.Line)
	}
	given := map[string]any{} // YAML key used: the value it gave
	errs := c.decodeSettings("", top, given)
	for _, s := range settings {
		old, ok := given[s.Old.Key]
		if !ok || s.Old.Key == "" {
			continue
		}
		*notices = append(*notices, fmt.Sprintf("%s (config file %s)", deprecated(s.Old.Key, s.Key), path))
		if v, ok := given[s.Key]; ok && v != old {
			errs = append(errs, bothNames(s.Old.Key, s.Key, old, v))
		}
	}
	// The lists are YAML's own strict decoding; it also refuses duplicate keys
	// anywhere in the file, as Other holds the rest.
	l := lists{Tables: c.Tables, Containers: c.Containers, KeyPrefixes: c.KeyPrefixes}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&l); err != nil {
		errs = append(errs, yamlError(err))
	}
	c.Tables, c.Containers, c.KeyPrefixes = l.Tables, l.Containers, l.KeyPrefixes
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	return nil
}

// lists are the YAML-only sections of a file.
type lists struct {
	Tables      []Table        `yaml:"tables"`
	Containers  []Container    `yaml:"containers"`
	KeyPrefixes []KeyPrefix    `yaml:"key_prefixes"`
	Other       map[string]any `yaml:",inline"`
}

var listKeys = []string{"tables", "containers", "key_prefixes"}

// decodeSettings decodes the settings of the mapping n, whose keys are under
// prefix ("" or "section."), by the table, recording in given the value
// each key gave (an old key's under the old key).
func (c *Config) decodeSettings(prefix string, n *yaml.Node, given map[string]any) []error {
	var errs []error
	// Merged mappings (<<: *base) first, so that the mapping's own keys win.
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k, v := n.Content[i], n.Content[i+1]; k.Tag == "!!merge" {
			for _, m := range mergedMappings(v) {
				errs = append(errs, c.decodeSettings(prefix, m, given)...)
			}
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if v.Kind == yaml.AliasNode {
			v = v.Alias
		}
		key := prefix + k.Value
		s := lookupSetting(key)
		if s == nil {
			s = lookupOldKey(key)
		}
		switch {
		case k.Tag == "!!merge" || prefix == "" && slices.Contains(listKeys, key):
		case s != nil:
			if err := v.Decode(s.Field(c)); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", key, yamlError(err)))
			} else {
				given[key] = value(s.Field(c))
			}
		case len(children(key+".")) > 0:
			switch {
			case v.Kind == yaml.MappingNode:
				errs = append(errs, c.decodeSettings(key+".", v, given)...)
			case v.Tag != "!!null": // an empty section is no section
				errs = append(errs, fmt.Errorf("line %d: %s holds settings (%s): want a mapping", v.Line, key, strings.Join(children(key+"."), ", ")))
			}
		default:
			errs = append(errs, fmt.Errorf("line %d: unknown key %s (known here: %s)", k.Line, key, strings.Join(children(prefix), ", ")))
		}
	}
	return errs
}

// children are the names one level below prefix: settings and sections.
func children(prefix string) []string {
	var out []string
	for _, s := range settings {
		if rest, ok := strings.CutPrefix(s.Key, prefix); ok {
			name, _, _ := strings.Cut(rest, ".")
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	if prefix == "" {
		out = append(out, listKeys...)
	}
	return out
}

// mergedMappings are the mappings a merge key's value names: one, or a list.
func mergedMappings(v *yaml.Node) []*yaml.Node {
	if v.Kind == yaml.AliasNode {
		v = v.Alias
	}
	switch v.Kind {
	case yaml.MappingNode:
		return []*yaml.Node{v}
	case yaml.SequenceNode:
		var out []*yaml.Node
		for _, e := range v.Content {
			out = append(out, mergedMappings(e)...)
		}
		return out
	}
	return nil
}

// yamlError drops yaml's "unmarshal errors:" header, keeping the lines.
func yamlError(err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return errors.New(strings.Join(te.Errors, "\n"))
	}
	return err
}
