package aiod

import (
	"testing"

	"github.com/a2c-smcp/a2c-go/internal/openapi"
)

// TestContractInfoRoutes holds the daemon's own routes to the published
// OpenAPI schemas.
func TestContractInfoRoutes(t *testing.T) {
	v2, err := openapi.Load(openapiV2)
	if err != nil {
		t.Fatal(err)
	}
	v1, err := openapi.Load(openapiV1)
	if err != nil {
		t.Fatal(err)
	}
	url := start(t, Config{})
	for _, c := range []struct {
		doc        *openapi.Doc
		method     string
		path, tmpl string
		status     int
	}{
		{v2, "GET", "/health", "/health", 200},
		{v2, "GET", "/v2/sandbox", "/v2/sandbox", 200},
		{v2, "GET", "/v2/sandbox/packages?lang=python", "/v2/sandbox/packages", 200},
		{v2, "GET", "/v2/sandbox/packages", "/v2/sandbox/packages", 422},
		{v1, "GET", "/v1/capabilities", "/v1/capabilities", 200},
		{v1, "GET", "/v1/capabilities?refresh=true", "/v1/capabilities", 200},
		{v1, "GET", "/v1/sandbox", "/v1/sandbox", 200},
		{v1, "GET", "/v1/sandbox/packages/python", "/v1/sandbox/packages/python", 200},
	} {
		resp, body := do(t, c.method, url+c.path, "", nil)
		if resp.StatusCode != c.status {
			t.Errorf("%s %s: %d %s", c.method, c.path, resp.StatusCode, body)
			continue
		}
		err := c.doc.Validate(c.method, c.tmpl, c.status, []byte(body))
		if c.status == 422 {
			err = c.doc.ValidateNamed("ValidationErrorResponse", []byte(body))
		}
		if err != nil && err != openapi.ErrNoSchema {
			t.Errorf("%s %s: %v\n%s", c.method, c.path, err, body)
		}
	}
}
