package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Doc is a loaded OpenAPI document.
type Doc struct {
	root  map[string]any
	paths map[string]any
}

// Load parses an OpenAPI document.
func Load(b []byte) (*Doc, error) {
	var root map[string]any
	if err := json.Unmarshal(b, &root); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	paths, _ := root["paths"].(map[string]any)
	if paths == nil {
		return nil, fmt.Errorf("openapi: no paths")
	}
	return &Doc{root: root, paths: paths}, nil
}

// Operation reports whether the document has method on the templated path
// (as written in the document, e.g. "/v2/commands/{command_id}").
func (d *Doc) Operation(method, path string) bool {
	_, ok := d.op(method, path)
	return ok
}

func (d *Doc) op(method, path string) (map[string]any, bool) {
	item, _ := d.paths[path].(map[string]any)
	op, ok := item[strings.ToLower(method)].(map[string]any)
	return op, ok
}

// ErrNoSchema is returned by Validate when the document declares the
// status without a JSON schema (so there is nothing to check).
var ErrNoSchema = fmt.Errorf("openapi: no JSON schema for this response")

// Validate checks body, the answer to method on the templated path with
// status, against the document. It fails when the operation or the status
// is undeclared, or the body does not match the schema.
func (d *Doc) Validate(method, path string, status int, body []byte) error {
	op, ok := d.op(method, path)
	if !ok {
		return fmt.Errorf("openapi: %s %s is not in the document", method, path)
	}
	resps, _ := op["responses"].(map[string]any)
	if len(resps) == 0 {
		return ErrNoSchema // the operation declares no answers at all
	}
	resp, ok := resps[strconv.Itoa(status)].(map[string]any)
	if !ok {
		if resp, ok = resps["default"].(map[string]any); !ok {
			return fmt.Errorf("openapi: %s %s does not declare status %d", method, path, status)
		}
	}
	resp = d.deref(resp)
	content, _ := resp["content"].(map[string]any)
	media, _ := content["application/json"].(map[string]any)
	schema, ok := media["schema"]
	if !ok {
		return ErrNoSchema
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("openapi: body is not JSON: %w", err)
	}
	return d.ValidateValue(schema, v)
}

// ValidateValue checks a decoded JSON value (numbers as json.Number or
// float64) against a schema of the document.
func (d *Doc) ValidateValue(schema any, v any) error {
	return d.check(schema, v, "$", 0)
}

func (d *Doc) deref(m map[string]any) map[string]any {
	for i := 0; i < 32; i++ {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		next := d.resolve(ref)
		if next == nil {
			return m
		}
		m = next
	}
	return m
}

func (d *Doc) resolve(ref string) map[string]any {
	if !strings.HasPrefix(ref, "#/") {
		return nil
	}
	var cur any = d.root
	for _, p := range strings.Split(ref[2:], "/") {
		p = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	m, _ := cur.(map[string]any)
	return m
}

func typeOf(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return "integer"
		}
		if f, err := x.Float64(); err == nil && f == float64(int64(f)) && !strings.ContainsAny(string(x), ".eE") {
			return "integer"
		}
		return "number"
	case float64:
		if x == float64(int64(x)) {
			return "integer"
		}
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

func typeMatches(want, got string) bool {
	return want == got || (want == "number" && got == "integer")
}

func num(v any) (float64, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	case float64:
		return x, true
	}
	return 0, false
}

func (d *Doc) check(schema any, v any, at string, depth int) error {
	if depth > 64 {
		return fmt.Errorf("%s: schema nesting too deep", at)
	}
	s, ok := schema.(map[string]any)
	if !ok {
		if b, isBool := schema.(bool); isBool && !b {
			return fmt.Errorf("%s: no value allowed", at)
		}
		return nil
	}
	if ref, ok := s["$ref"].(string); ok {
		r := d.resolve(ref)
		if r == nil {
			return fmt.Errorf("%s: unresolvable %s", at, ref)
		}
		if err := d.check(r, v, at, depth+1); err != nil {
			return err
		}
	}
	got := typeOf(v)
	switch t := s["type"].(type) {
	case string:
		if !typeMatches(t, got) {
			return fmt.Errorf("%s: %s, want %s", at, got, t)
		}
	case []any:
		okType := false
		var names []string
		for _, x := range t {
			n, _ := x.(string)
			names = append(names, n)
			okType = okType || typeMatches(n, got)
		}
		if !okType {
			return fmt.Errorf("%s: %s, want %s", at, got, strings.Join(names, "|"))
		}
	}
	if en, ok := s["enum"].([]any); ok {
		found := false
		for _, e := range en {
			found = found || fmt.Sprint(e) == fmt.Sprint(v)
		}
		if !found {
			return fmt.Errorf("%s: %v is not one of %v", at, v, en)
		}
	}
	if c, ok := s["const"]; ok && fmt.Sprint(c) != fmt.Sprint(v) {
		return fmt.Errorf("%s: %v, want %v", at, v, c)
	}
	if n, ok := num(v); ok {
		if m, ok := num(s["minimum"]); ok && n < m {
			return fmt.Errorf("%s: %v < minimum %v", at, n, m)
		}
		if m, ok := num(s["maximum"]); ok && n > m {
			return fmt.Errorf("%s: %v > maximum %v", at, n, m)
		}
	}
	for _, sub := range asList(s["allOf"]) {
		if err := d.check(sub, v, at, depth+1); err != nil {
			return err
		}
	}
	if err := d.oneOf(s, v, at, depth); err != nil {
		return err
	}
	switch x := v.(type) {
	case map[string]any:
		return d.checkObject(s, x, at, depth)
	case []any:
		if items, ok := s["items"]; ok {
			for i, e := range x {
				if err := d.check(items, e, fmt.Sprintf("%s[%d]", at, i), depth+1); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func asList(v any) []any { l, _ := v.([]any); return l }

// oneOf accepts exactly one matching branch (anyOf: at least one).
func (d *Doc) oneOf(s map[string]any, v any, at string, depth int) error {
	for _, kw := range []string{"oneOf", "anyOf"} {
		branches := asList(s[kw])
		if len(branches) == 0 {
			continue
		}
		matched := 0
		var firstErr error
		for _, b := range branches {
			if err := d.check(b, v, at, depth+1); err == nil {
				matched++
			} else if firstErr == nil {
				firstErr = err
			}
		}
		if matched == 0 {
			return fmt.Errorf("%s: matches no branch of %s (first: %v)", at, kw, firstErr)
		}
		if kw == "oneOf" && matched > 1 && v != nil { // a null matching several nullable branches is a generator artefact
			return fmt.Errorf("%s: matches %d branches of oneOf", at, matched)
		}
	}
	return nil
}

func (d *Doc) checkObject(s map[string]any, x map[string]any, at string, depth int) error {
	for _, r := range asList(s["required"]) {
		name, _ := r.(string)
		if _, ok := x[name]; !ok {
			return fmt.Errorf("%s: missing required %q", at, name)
		}
	}
	props, _ := s["properties"].(map[string]any)
	keys := make([]string, 0, len(x))
	for k := range x {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if ps, ok := props[k]; ok {
			if err := d.check(ps, x[k], at+"."+k, depth+1); err != nil {
				return err
			}
			continue
		}
		switch ap := s["additionalProperties"].(type) {
		case bool:
			if !ap {
				return fmt.Errorf("%s: unexpected property %q", at, k)
			}
		case map[string]any:
			if err := d.check(ap, x[k], at+"."+k, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// ValidateNamed checks a JSON body against the named schema of
// components/schemas (for answers an operation does not declare, such as
// the 422 every JSON route can give).
func (d *Doc) ValidateNamed(name string, body []byte) error {
	s := d.resolve("#/components/schemas/" + name)
	if s == nil {
		return fmt.Errorf("openapi: no schema %q", name)
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("openapi: body is not JSON: %w", err)
	}
	return d.check(s, v, "$", 0)
}
