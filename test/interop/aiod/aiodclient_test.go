package aiod

import (
	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"

	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/openapi"
)

// aio drives a running aiod over HTTP and holds every JSON answer to the
// published OpenAPI documents: the contract test rides on every call.
type aio struct {
	t    *testing.T
	base string
	key  string
}

var (
	docsOnce sync.Once
	docV1    *openapi.Doc
	docV2    *openapi.Doc
)

func docs(t *testing.T) (v1, v2 *openapi.Doc) {
	docsOnce.Do(func() {
		load := func(name string) *openapi.Doc {
			b, err := os.ReadFile(filepath.Join(harness.Root(), "aiod", "openapi", name))
			if err != nil {
				t.Fatal(err)
			}
			d, err := openapi.Load(b)
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		docV1, docV2 = load("v1-openapi.json"), load("v2-openapi.json")
	})
	return docV1, docV2
}

// envelope is the decoded answer of a JSON route, as the published API
// defines it (the test shares no type with the daemon).
type envelope struct {
	Success bool            `json:"success"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
	Hint    *string         `json:"hint"`
	Errors  []struct {
		Location []string `json:"location"`
		Message  string   `json:"message"`
		Type     string   `json:"type"`
	} `json:"errors"`
	raw []byte
}

// obj decodes data as an object.
func (e envelope) obj() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(e.Data, &m)
	return m
}

// httpClient bounds every request of the suite, so a daemon that never
// answers fails the step instead of hanging the run (the longest route,
// a code cell, waits at most a few minutes).
var httpClient = &http.Client{Timeout: 5 * time.Minute}

// contracted records, per route ("METHOD /template"), whether an answer
// was held to a schema of the OpenAPI documents (true) or was only seen
// without one (false). The coverage gate in TestMain reads it.
var contracted struct {
	sync.Mutex
	routes map[string]bool
}

// record notes an answer of the route; checked says it was held to a
// schema. A route once checked stays checked.
func record(method, tmpl string, checked bool) {
	contracted.Lock()
	defer contracted.Unlock()
	if contracted.routes == nil {
		contracted.routes = map[string]bool{}
	}
	key := method + " " + tmpl
	contracted.routes[key] = contracted.routes[key] || checked
}

// raw sends one request; body is JSON-encoded unless it is a string or
// []byte. hdr is pairs of header names and values.
func (a *aio) raw(method, path string, body any, hdr ...string) (*http.Response, []byte) {
	a.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, a.base+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.key != "" {
		req.Header.Set("Authorization", "Bearer "+a.key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	return resp, out
}

// call sends a JSON request to the route written as in the OpenAPI
// document (tmpl, e.g. "/v2/commands/{command_id}"), checks the answer
// against the document, and decodes the envelope.
func (a *aio) call(method, tmpl, path string, body any, hdr ...string) (int, envelope) {
	a.t.Helper()
	resp, out := a.raw(method, path, body, hdr...)
	var e envelope
	if err := json.Unmarshal(out, &e); err != nil {
		a.t.Fatalf("%s %s: %d, not JSON: %q", method, path, resp.StatusCode, out)
	}
	e.raw = out
	a.contract(method, tmpl, resp.StatusCode, out)
	return resp.StatusCode, e
}

func (a *aio) contract(method, tmpl string, status int, body []byte) {
	a.t.Helper()
	holdToContract(a.t, method, tmpl, status, body)
}

// holdToContract checks one JSON answer of the route written as in the
// OpenAPI document (tmpl) against that document, and records it for the
// coverage gate.
func holdToContract(t *testing.T, method, tmpl string, status int, body []byte) {
	t.Helper()
	v1, v2 := docs(t)
	doc := v2
	if strings.HasPrefix(tmpl, "/v1/") {
		doc = v1
	}
	if !doc.Operation(method, tmpl) {
		// Documented in the published docs but absent from the OpenAPI
		// (DELETE /v2/code/sessions): nothing to hold it to.
		record(method, tmpl, false)
		return
	}
	var head struct {
		Success *bool           `json:"success"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	_ = json.Unmarshal(body, &head)
	var err error
	switch {
	case status == 422 && head.Message == "Request data validation failed":
		err = doc.ValidateNamed("ValidationErrorResponse", body)
	case head.Success != nil && !*head.Success && (strings.HasPrefix(tmpl, "/v1/file/") || strings.HasPrefix(tmpl, "/v2/fs/")) && string(head.Data) != "null":
		// A failed file operation carries the structured file error,
		// on v1 with status 200.
		err = doc.ValidateNamed("FileOperationError", head.Data)
	case status >= 400:
		// Other failures are declared without schemas; the tests check
		// their envelopes themselves.
		record(method, tmpl, false)
		return
	default:
		err = doc.Validate(method, tmpl, status, body)
	}
	if err == openapi.ErrNoSchema {
		record(method, tmpl, false)
		return
	}
	if err != nil {
		t.Errorf("contract %s %s %d: %v\n%s", method, tmpl, status, err, body)
		return
	}
	record(method, tmpl, true)
}

// planeTemplate is the OpenAPI template of a browser or computer-use
// route (the tab id as {tab_id}), or "" for any other path.
func planeTemplate(path string) string {
	for _, p := range []string{"/v1/browser/", "/v2/browser/", "/v2/computer/", "/v1/display/"} {
		if !strings.HasPrefix(path, p) {
			continue
		}
		parts := strings.Split(path, "/")
		if len(parts) >= 5 && parts[3] == "tabs" {
			parts[4] = "{tab_id}"
		}
		return strings.Join(parts, "/")
	}
	return ""
}

// holdPlaneAnswer holds an answer of the browser or computer-use planes,
// got by a test's own HTTP helper, to the contract: a JSON body to its
// schema, any other body (an image) as exercised.
func holdPlaneAnswer(t *testing.T, method, rawURL string, resp *http.Response, body []byte) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		return
	}
	tmpl := planeTemplate(u.Path)
	if tmpl == "" {
		return
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		record(method, tmpl, false)
		return
	}
	holdToContract(t, method, tmpl, resp.StatusCode, body)
}

// covered records a route exercised by a stream or a WebSocket, whose
// answer has no JSON schema to hold it to.
func (a *aio) covered(method, tmpl string) { record(method, tmpl, false) }
