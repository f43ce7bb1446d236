package cli

import (
	"flag"
	"os"

	"github.com/a2c-smcp/a2c-go/internal/origin"
)

// The variables that give --allowed-host and --allowed-origin their
// defaults on a2c server and a2c up, comma-separated.
const (
	envAllowedHosts   = "A2C_ALLOWED_HOSTS"
	envAllowedOrigins = "A2C_ALLOWED_ORIGINS"
)

// addOriginFlags declares --allowed-host and --allowed-origin (package
// origin: the Host and Origin rule of every listener).
func addOriginFlags(fs *flag.FlagSet) *origin.Flags {
	return origin.AddFlags(fs, envAllowedHosts, envAllowedOrigins)
}

// originLists are the allowed hosts and origins in force (the flags, else
// the variables); a bad value in a variable is a usage error.
func originLists(f *origin.Flags) (hosts, origins []string, err error) {
	hosts, origins, err = f.Resolve(os.Getenv, envAllowedHosts, envAllowedOrigins)
	if err != nil {
		return nil, nil, usageError{err.Error()}
	}
	return hosts, origins, nil
}

// originPolicy is the rule of a listener on listen, with the lists of f.
func originPolicy(f *origin.Flags, listen string) (*origin.Policy, error) {
	hosts, origins, err := originLists(f)
	if err != nil {
		return nil, err
	}
	return listenerPolicy(listen, hosts, origins)
}

// listenerPolicy is the rule of a listener on listen with the lists
// given (already checked by [originLists]); a listen address that is not
// host:port is a usage error.
func listenerPolicy(listen string, hosts, origins []string) (*origin.Policy, error) {
	p, err := origin.New(origin.Config{Listen: listen, Hosts: hosts, Origins: origins})
	if err != nil {
		return nil, usageError{err.Error()}
	}
	return p, nil
}
