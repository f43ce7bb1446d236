package credenv

import (
	"os"
	"slices"
	"strings"
)

// names are the credential variables: A2C_TOKEN (hub token of a2c server,
// computer, agent, up and aiod --office), AIO_API_KEY and SANDBOX_API_KEY
// (aiod's key, and the console's key for its sandboxes), A2C_REDIS_URL (a
// cluster's Redis URL, which may hold a password), A2C_CLUSTER_KEY (the
// key that seals the frames between a cluster's nodes), EXTRA_MCP_SERVERS
// (aiod's upstream MCP servers, whose URLs may too) and the OTLP headers
// the tracing exporter sends (an Authorization header, often).
var names = []string{
	"A2C_TOKEN",
	"AIO_API_KEY",
	"SANDBOX_API_KEY",
	"A2C_REDIS_URL",
	"A2C_CLUSTER_KEY",
	"EXTRA_MCP_SERVERS",
	"OTEL_EXPORTER_OTLP_HEADERS",
	"OTEL_EXPORTER_OTLP_TRACES_HEADERS",
}

// InputPrefix starts the variables that give a Computer's inputs their
// values (config.EnvPrefix): plugins' passwords among them. The
// Computer reads them; no process it starts inherits one (a server gets
// the values its own configuration renders).
const InputPrefix = "A2C_SMCP_"

// Names returns the credential variables' names.
func Names() []string { return slices.Clone(names) }

// Strip returns environ ("KEY=value" entries) without the credential
// variables and without the names in also. environ is not changed.
func Strip(environ []string, also ...string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, k) && !slices.Contains(also, k) && !strings.HasPrefix(k, InputPrefix) {
			out = append(out, kv)
		}
	}
	return out
}

// Environ is this process's environment without the credential variables
// and the names in also: what a child we start inherits.
func Environ(also ...string) []string { return Strip(os.Environ(), also...) }
