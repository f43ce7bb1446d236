package origin

import (
	"flag"
	"fmt"
	"strings"
)

// Flags are --allowed-host and --allowed-origin as every binary declares
// them: repeatable, each value (or comma-separated list of values)
// checked as it is parsed, so a bad one stops the command line with one
// line naming it.
type Flags struct {
	Hosts, Origins List
}

// AddFlags declares --allowed-host and --allowed-origin on fs; env names
// the variables that give their defaults, for the usage text.
func AddFlags(fs *flag.FlagSet, hostsEnv, originsEnv string) *Flags {
	f := &Flags{Hosts: List{parse: ParseHost}, Origins: List{parse: ParseOrigin}}
	fs.Var(&f.Hosts, "allowed-host", "a host name (or address) this server answers to besides loopback and its listen address, for a proxy or a public name; repeatable (env "+hostsEnv+", comma-separated)")
	fs.Var(&f.Origins, "allowed-origin", "a web origin (scheme://host[:port]) whose pages may call this server, with CORS; repeatable (env "+originsEnv+", comma-separated)")
	return f
}

// Resolve is the lists in force: a flag given replaces its variable's
// list (read with getenv), as every other flag does. A bad value in a
// variable is an error naming it.
func (f *Flags) Resolve(getenv func(string) string, hostsEnv, originsEnv string) (hosts, origins []string, err error) {
	if hosts, err = f.Hosts.orEnv(getenv, hostsEnv); err != nil {
		return nil, nil, err
	}
	if origins, err = f.Origins.orEnv(getenv, originsEnv); err != nil {
		return nil, nil, err
	}
	return hosts, origins, nil
}

// List is a repeatable flag of checked values.
type List struct {
	values []string
	set    bool
	parse  func(string) (string, error)
}

// String lists the values, comma-separated.
func (l *List) String() string { return strings.Join(l.values, ",") }

// Set adds a value, or each of a comma-separated list, checked.
func (l *List) Set(s string) error {
	for _, v := range SplitList(s) {
		n, err := l.parse(v)
		if err != nil {
			return err
		}
		l.values = append(l.values, n)
	}
	l.set = true
	return nil
}

// Values are the values given, in order.
func (l *List) Values() []string { return l.values }

// orEnv is the flag's values when it was given, else the variable's.
func (l *List) orEnv(getenv func(string) string, env string) ([]string, error) {
	if l.set {
		return l.values, nil
	}
	return ParseEnv(getenv(env), env, l.parse)
}

// ParseEnv checks a comma-separated list from the variable env with
// parse, and returns the values parsed.
func ParseEnv(raw, env string, parse func(string) (string, error)) ([]string, error) {
	var out []string
	for _, v := range SplitList(raw) {
		n, err := parse(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", env, err)
		}
		out = append(out, n)
	}
	return out, nil
}
