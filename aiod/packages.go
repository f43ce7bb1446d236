package aiod

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/serde"
	"github.com/a2c-smcp/a2c-go/internal/credenv"
)

// pythonList prints name==version for every installed distribution,
// without needing pip.
const pythonList = `import importlib.metadata as m
seen = set()
for d in m.distributions():
    n = d.metadata["Name"]
    if n and n.lower() not in seen:
        seen.add(n.lower())
        print(n + "==" + d.version)`

// packages is GET /v2/sandbox/packages?lang=python|nodejs: the installed
// packages as "  - name==version" lines.
func (d *Daemon) packages(w http.ResponseWriter, r *http.Request) {
	q, verr := serde.DecodeQuery(r.URL.Query(), []serde.Field{{Name: "lang", Kind: serde.String, Required: true}})
	if verr != nil {
		Invalid(w, verr)
		return
	}
	d.listPackages(w, r, q["lang"].(string))
}

// packagesV1 is GET /v1/sandbox/packages/{python|nodejs}.
func (d *Daemon) packagesV1(w http.ResponseWriter, r *http.Request) {
	d.listPackages(w, r, r.PathValue("lang"))
}

func (d *Daemon) listPackages(w http.ResponseWriter, r *http.Request, lang string) {
	text, err := d.packageList(r.Context(), lang)
	if err != nil {
		var pe *packageError
		if errors.As(err, &pe) {
			Fail(w, pe.status, pe.msg, nil, pe.hint)
			return
		}
		Fail(w, http.StatusInternalServerError, "listing packages failed", nil)
		return
	}
	OK(w, text)
}

// packageError is a listing that could not be made: its status on the
// HTTP routes and the daemon's wording (the MCP tool sandbox_get_packages
// shows the wording).
type packageError struct {
	status    int
	msg, hint string
}

func (e *packageError) Error() string { return e.msg }

// packageList is the listing both the routes and sandbox_get_packages
// answer: "  - name==version" lines for python, a "Node.js Packages:"
// header and "  - name@version" lines for nodejs. Its errors are
// *packageError.
func (d *Daemon) packageList(ctx context.Context, lang string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var names []string
	switch lang {
	case "python":
		py, err := findBinary("python3", "/usr/bin/python3", "python")
		if err != nil {
			return "", &packageError{http.StatusServiceUnavailable, "python is not available", "looked for python3 and python on PATH and /usr/bin/python3"}
		}
		cmd := exec.CommandContext(ctx, py, "-c", pythonList)
		cmd.Env = credenv.Environ()
		out, err := cmd.Output()
		if err != nil {
			return "", &packageError{status: http.StatusInternalServerError, msg: "listing python packages failed"}
		}
		names = strings.Fields(string(out))
	case "nodejs":
		npm, err := findBinary("npm")
		if err != nil {
			return "", &packageError{http.StatusServiceUnavailable, "nodejs is not available", "looked for npm on PATH"}
		}
		cmd := exec.CommandContext(ctx, npm, "ls", "-g", "--depth=0", "--json")
		cmd.Env = credenv.Environ()
		out, _ := cmd.Output()
		var tree struct {
			Dependencies map[string]struct {
				Version string `json:"version"`
			} `json:"dependencies"`
		}
		if err := json.Unmarshal(out, &tree); err != nil {
			return "", &packageError{status: http.StatusInternalServerError, msg: "listing nodejs packages failed"}
		}
		for n, dep := range tree.Dependencies {
			names = append(names, n+"@"+dep.Version)
		}
	default:
		return "", &packageError{status: http.StatusBadRequest, msg: fmt.Sprintf("unknown lang %q: expected python or nodejs", lang)}
	}
	sort.Slice(names, func(i, j int) bool { return strings.ToLower(names[i]) < strings.ToLower(names[j]) })
	var b strings.Builder
	if lang == "nodejs" {
		b.WriteString("Node.js Packages:\n")
	}
	for _, n := range names {
		b.WriteString("  - " + n + "\n")
	}
	return b.String(), nil
}

// findBinary returns the first of names found on PATH (or as a path).
func findBinary(names ...string) (string, error) {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("none of %v found", names)
}
