package openapi

import (
	"strings"
	"testing"
)

const doc = `{"openapi":"3.1.0","paths":{"/bare":{"post":{"summary":"no answers declared"}},"/x/{id}":{"get":{"responses":{
 "200":{"content":{"application/json":{"schema":{"$ref":"#/components/schemas/Env"}}}},
 "404":{"description":"gone"}}}}},
 "components":{"schemas":{
  "Env":{"type":"object","required":["success","data"],"properties":{"success":{"type":"boolean"},"data":{"$ref":"#/components/schemas/D"},"hint":{"type":["string","null"]}}},
  "D":{"type":"object","additionalProperties":false,"required":["n"],"properties":{"n":{"type":"integer","minimum":0},"s":{"enum":["a","b"]},"l":{"type":"array","items":{"type":"string"}},"o":{"oneOf":[{"type":"null"},{"$ref":"#/components/schemas/A"}]}}},
  "A":{"type":"object","required":["k"],"properties":{"k":{"type":"string"}}}}}}`

func TestValidate(t *testing.T) {
	d, err := Load([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		status int
		body   string
		want   string // "" = valid, else a substring of the error
	}{
		{200, `{"success":true,"data":{"n":1,"s":"a","l":["x"],"o":null},"hint":null}`, ""},
		{200, `{"success":true,"data":{"n":1,"o":{"k":"v"}}}`, ""},
		{200, `{"success":true,"data":{"n":-1}}`, "minimum"},
		{200, `{"success":true,"data":{"n":1.5}}`, "want integer"},
		{200, `{"success":true,"data":{"n":1,"s":"c"}}`, "not one of"},
		{200, `{"success":true,"data":{"n":1,"extra":1}}`, "unexpected property"},
		{200, `{"success":true}`, `missing required "data"`},
		{200, `{"success":true,"data":{"n":1,"l":[1]}}`, "$.data.l[0]"},
		{200, `{"success":true,"data":{"n":1,"o":{}}}`, "no branch"},
		{200, `{"success":true,"data":{"n":1},"hint":3}`, "want string|null"},
		{404, `{}`, "no JSON schema"},
		{500, `{}`, "does not declare status 500"},
	}
	for _, c := range cases {
		err := d.Validate("GET", "/x/{id}", c.status, []byte(c.body))
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%d %s: %v, want %q", c.status, c.body, err, c.want)
		}
	}
	if err := d.Validate("POST", "/bare", 200, []byte(`{}`)); err != ErrNoSchema {
		t.Errorf("an operation without responses: %v", err)
	}
	if d.Operation("POST", "/x/{id}") || !d.Operation("GET", "/x/{id}") {
		t.Error("Operation")
	}
}
