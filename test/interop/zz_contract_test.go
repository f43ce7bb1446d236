package interop

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestZZContractCoverage runs after the aiod tests (files run in name
// order) and checks that every route of the implemented planes had at
// least one answer held to its OpenAPI schema. It only judges a full run.
func TestZZContractCoverage(t *testing.T) {
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() != "" {
		t.Skip("coverage is judged on a full run only")
	}
	implemented := []string{"/v2/commands", "/v2/fs/", "/v2/sandbox", "/v1/bash/", "/v1/file/", "/v1/shell/", "/v1/capabilities",
		"/v2/code/", "/v2/pty/", "/v2/watch", "/v1/code/", "/v1/jupyter/", "/v1/nodejs/"}
	var skip []string
	var missing []string
	for _, name := range []string{"v1-openapi.json", "v2-openapi.json"} {
		b, err := os.ReadFile(filepath.Join(moduleRoot(), "sandbox", "openapi", name))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Paths map[string]map[string]json.RawMessage `json:"paths"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
	paths:
		for path, ops := range doc.Paths {
			for _, s := range skip {
				if strings.HasPrefix(path, s) {
					continue paths
				}
			}
			in := false
			for _, p := range implemented {
				in = in || strings.HasPrefix(path, p)
			}
			if !in {
				continue
			}
			for method := range ops {
				if method == "parameters" {
					continue
				}
				key := strings.ToUpper(method) + " " + path
				contracted.Lock()
				ok := contracted.routes[key]
				contracted.Unlock()
				if !ok {
					missing = append(missing, key)
				}
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("routes never checked against the OpenAPI (%d):\n%s", len(missing), strings.Join(missing, "\n"))
	}
	contracted.Lock()
	t.Logf("%d routes held to the OpenAPI schemas", len(contracted.routes))
	contracted.Unlock()
}
