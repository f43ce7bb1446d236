package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/a2c-smcp/a2c-go/aiod/pool"
)

// poolHTTP is the four lifecycle calls of a sandbox pool's HTTP API
// (shared/spec/sandboxes.md, "Routes") that officeSandboxes makes, over
// the wire types of package aiod/pool. aiod/pool's own client supersedes
// it: newSandboxPool is the one place that picks it.
type poolHTTP struct {
	base  string // the pool's URL, no trailing slash
	token string
	hc    *http.Client
}

// newSandboxPool returns the client of the pool at base (an http or https
// URL), authenticated with token when not empty.
func newSandboxPool(base, token string) sandboxPool {
	return &poolHTTP{base: strings.TrimRight(base, "/"), token: token, hc: &http.Client{}}
}

func (c *poolHTTP) Create(ctx context.Context, req pool.CreateRequest) (pool.Sandbox, error) {
	var sb pool.Sandbox
	err := c.do(ctx, http.MethodPost, "/v2/sandboxes", req, &sb)
	return sb, err
}

func (c *poolHTTP) List(ctx context.Context, f poolListFilter) ([]pool.Sandbox, error) {
	q := url.Values{}
	if f.State != "" {
		q.Set("state", f.State)
	}
	if f.Office != "" {
		q.Set("office", f.Office)
	}
	for k, v := range f.Metadata {
		q.Set("metadata."+k, v)
	}
	path := "/v2/sandboxes"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var l pool.List
	err := c.do(ctx, http.MethodGet, path, nil, &l)
	return l.Sandboxes, err
}

func (c *poolHTTP) Delete(ctx context.Context, id string, keepWorkspace bool) error {
	return c.do(ctx, http.MethodDelete, "/v2/sandboxes/"+url.PathEscape(id)+"?keep_workspace="+strconv.FormatBool(keepWorkspace), nil, nil)
}

func (c *poolHTTP) Pause(ctx context.Context, id string) (pool.Sandbox, error) {
	var sb pool.Sandbox
	err := c.do(ctx, http.MethodPost, "/v2/sandboxes/"+url.PathEscape(id)+"/pause", nil, &sb)
	return sb, err
}

// maxPoolAnswer bounds an answer of the pool read into memory.
const maxPoolAnswer = 8 << 20

// do sends one request (body as JSON when not nil) and decodes a 2xx
// answer into out (when not nil); any other status is a *pool.Error
// with the pool's message.
func (c *poolHTTP) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("pool: encoding the request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxPoolAnswer))
	if err != nil {
		return fmt.Errorf("pool: reading the answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		var eb pool.ErrorBody
		msg := http.StatusText(resp.StatusCode)
		if json.Unmarshal(b, &eb) == nil && eb.Error.Message != "" {
			msg = eb.Error.Message
		}
		return &pool.Error{Status: resp.StatusCode, Message: msg}
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("pool: decoding the answer of %s %s: %w", method, path, err)
	}
	return nil
}
