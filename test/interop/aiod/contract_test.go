// Package aiod holds the black-box tests of the sandbox daemon: they build
// the real aiod binary, start it on random loopback ports, drive every
// plane over HTTP, WebSocket and SSE, and hold every JSON answer to the
// published OpenAPI documents.
package aiod

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// implemented are the OpenAPI path prefixes of the planes aiod serves.
var implemented = []string{"/v2/commands", "/v2/fs/", "/v2/sandbox", "/v1/bash/", "/v1/file/", "/v1/shell/", "/v1/capabilities",
	"/v2/code/", "/v2/pty/", "/v2/watch", "/v1/code/", "/v1/jupyter/", "/v1/nodejs/",
	"/v2/browser/", "/v2/computer/", "/v1/browser/actions", "/v1/display/record", "/v1/browser/info", "/v1/browser/screenshot",
	"/v1/browser/navigate", "/v1/browser/evaluate", "/v1/browser/snapshot", "/v1/browser/click", "/v1/browser/fill",
	"/v1/browser/upload", "/v1/browser/config", "/v1/browser/cdp", "/v1/browser/tabs", "/v1/browser/cookies",
	"/v1/browser/network/requests"}

// schemaless are the routes whose answers cannot be held to a schema,
// each with the reason. Every other implemented route must have had an
// answer validated against its schema in a full run.
var schemaless = map[string]string{
	// The published documents declare these operations with no responses
	// at all; TestAiodCode and TestAiodInteractiveSweep check their
	// envelopes field by field.
	"POST /v2/code/execute":                            noResponses,
	"GET /v2/code/info":                                noResponses,
	"GET /v2/code/sessions":                            noResponses,
	"POST /v2/code/sessions":                           noResponses,
	"DELETE /v2/code/sessions/{session_id}":            noResponses,
	"GET /v2/code/sessions/{session_id}":               noResponses,
	"POST /v1/code/execute":                            noResponses,
	"GET /v1/code/info":                                noResponses,
	"POST /v1/jupyter/execute":                         noResponses,
	"GET /v1/jupyter/info":                             noResponses,
	"DELETE /v1/jupyter/sessions":                      noResponses,
	"GET /v1/jupyter/sessions":                         noResponses,
	"POST /v1/jupyter/sessions/create":                 noResponses,
	"DELETE /v1/jupyter/sessions/{session_id}":         noResponses,
	"GET /v1/jupyter/sessions/{session_id}":            noResponses,
	"POST /v1/jupyter/sessions/{session_id}/interrupt": noResponses,
	"POST /v1/jupyter/sessions/{session_id}/restart":   noResponses,
	"POST /v1/nodejs/execute":                          noResponses,
	"GET /v1/nodejs/info":                              noResponses,
	"GET /v1/nodejs/sessions":                          noResponses,
	"POST /v1/nodejs/sessions":                         noResponses,
	"DELETE /v1/nodejs/sessions/{session_id}":          noResponses,
	"GET /v1/nodejs/sessions/{session_id}":             noResponses,
	// Bodies that are not JSON: checked byte for byte by TestAiodFiles.
	"GET /v2/fs/download":    "octet-stream body",
	"GET /v1/file/download":  "octet-stream body (200/206)",
	"HEAD /v1/file/download": "no body",
	"GET /v2/fs/tree":        "application/x-tar body",
	// Streams: frames checked by TestAiodWatch and TestAiodTerminal.
	"GET /v2/watch/{watcher_id}/events":      "text/event-stream",
	"GET /v1/file/watch/{watcher_id}/events": "text/event-stream",
	"GET /v2/pty/sessions/{id}/ws":           "WebSocket (101)",
	"GET /v2/pty/ws":                         "WebSocket (101)",
	"GET /v1/shell/ws":                       "WebSocket (101)",
	// Declared with no response schema; TestAiodBrowser checks the
	// envelopes field by field.
	"GET /v2/browser/cookies":                 noResponses,
	"GET /v1/browser/cookies":                 noResponses,
	"DELETE /v2/browser/cookies":              noResponses,
	"DELETE /v1/browser/cookies":              noResponses,
	"DELETE /v2/browser/tabs/{tab_id}":        noResponses,
	"DELETE /v1/browser/tabs/{tab_id}":        noResponses,
	"POST /v2/browser/tabs/{tab_id}/activate": noResponses,
	"POST /v1/browser/tabs/{tab_id}/activate": noResponses,
	"GET /v2/browser/network/requests":        noResponses,
	"GET /v1/browser/network/requests":        noResponses,
	// Only the 501 of a machine with no accessibility backend can be
	// produced here (TestAiodComputerUse checks it).
	"GET /v2/computer/accessibility":       "501: no accessibility backend",
	"GET /v2/computer/accessibility/nodes": "501: no accessibility backend",
	// Images: signatures and headers checked by TestAiodBrowser and
	// TestAiodComputerUse.
	"GET /v2/browser/screenshot":  "image body",
	"GET /v1/browser/screenshot":  "image body",
	"GET /v2/computer/screenshot": "image body",
}

const noResponses = "the published document declares no response for it"

// TestMain runs the suite, then (on a full run only) the contract gate:
// every route of the implemented planes had an answer held to its OpenAPI
// schema, or is listed in schemaless with the reason and was exercised.
func TestMain(m *testing.M) {
	flag.Parse()
	code := harness.Main(m)
	if code == 0 && (flag.Lookup("test.run").Value.String() == "" && !testing.Short() || os.Getenv("A2C_CONTRACT_GATE") != "") {
		if err := contractGate(); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL contract coverage:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// contractGate judges the routes recorded by the suite against the
// documents' paths.
func contractGate() error {
	var problems []string
	for _, name := range []string{"v1-openapi.json", "v2-openapi.json"} {
		b, err := os.ReadFile(filepath.Join(harness.Root(), "aiod", "openapi", name))
		if err != nil {
			return err
		}
		var doc struct {
			Paths map[string]map[string]json.RawMessage `json:"paths"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			return err
		}
		for path, ops := range doc.Paths {
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
				checked, seen := contracted.routes[key]
				contracted.Unlock()
				_, listed := schemaless[key]
				switch {
				case checked:
				case !seen:
					problems = append(problems, key+": never exercised")
				case !listed:
					problems = append(problems, key+": answered, but no answer was held to a schema (list it in schemaless with the reason, or check it)")
				}
			}
		}
	}
	sort.Strings(problems)
	contracted.Lock()
	n := 0
	for _, ok := range contracted.routes {
		if ok {
			n++
		}
	}
	contracted.Unlock()
	if len(problems) > 0 {
		return fmt.Errorf("%d routes:\n%s", len(problems), strings.Join(problems, "\n"))
	}
	fmt.Fprintf(os.Stderr, "contract coverage: %d routes held to the OpenAPI schemas, %d schema-less by design\n", n, len(schemaless))
	return nil
}
