package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/redact"
)

// Upstream limits.
const (
	// listTimeout bounds one upstream's part of a tools/list.
	listTimeout = 3 * time.Second
	// callTimeout bounds a forwarded tools/call (the longest built-in, a
	// code cell, may run 900 s).
	callTimeout = 20 * time.Minute
	// maxUpstreamBody bounds an upstream's answer.
	maxUpstreamBody = 64 << 20
	// maxListPages bounds the pages of one upstream's tools/list.
	maxListPages = 20
)

// HopHeader marks every request aiod sends to an upstream. A request
// that carries it is answered from the built-in tools only: its
// tools/list does not ask this daemon's upstreams and its tools/call is
// never forwarded, so a daemon peered with itself, or two peered both
// ways, answer each list with one round (20 tools each for two daemons)
// instead of asking each other forever.
const HopHeader = "X-Aiod-Mcp-Hop"

// hopKey marks a context whose request carried [HopHeader].
type hopKey struct{}

func withHop(ctx context.Context) context.Context { return context.WithValue(ctx, hopKey{}, true) }

func isHop(ctx context.Context) bool { return ctx.Value(hopKey{}) != nil }

// errInvalidAnswer is an upstream answer that is not the JSON-RPC
// response to the request sent (not one at all, or another id).
var errInvalidAnswer = errors.New("the answer is not the JSON-RPC response to the request")

// upstream is one usable EXTRA_MCP_SERVERS entry.
type upstream struct {
	name    string
	prefix  string // "" : names must start with name + "_"
	key     string // what a published name starts with: prefix + "_", or name + "_"
	url     string
	display string // url as logs and messages show it (redact.URL)
	ids     atomic.Int64
}

// upTool is one tool an upstream listed, renamed as /mcp publishes it.
type upTool struct {
	name string
	raw  json.RawMessage
}

// parseUpstreams reads EXTRA_MCP_SERVERS: a JSON object whose members, in
// order, are {"url": "http://127.0.0.1:PORT/path", "prefix": "p"}. Only
// http:// URLs on 127.0.0.1, localhost or [::1] are used; a stdio entry
// ("command"), a remote or non-http URL, a malformed entry or a repeated
// name is skipped with a warning. A value that is not a JSON object
// registers nothing.
func parseUpstreams(raw string) (ups []*upstream, warnings []string) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, nil
	}
	if !json.Valid([]byte(raw)) {
		return nil, []string{"EXTRA_MCP_SERVERS is not valid JSON; no MCP server registered"}
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, []string{`EXTRA_MCP_SERVERS is not a JSON object ({"name": {"url": ..., "prefix": ...}}); no MCP server registered`}
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, _ := dec.Token()
		name, _ := tok.(string)
		var entry json.RawMessage
		if err := dec.Decode(&entry); err != nil {
			break // cannot happen: the value is valid JSON
		}
		u, warn := parseUpstream(name, entry)
		switch {
		case warn != "":
			warnings = append(warnings, warn)
		case seen[name]:
			warnings = append(warnings, fmt.Sprintf("MCP server %q appears twice; the first entry is kept", name))
		default:
			seen[name] = true
			ups = append(ups, u)
		}
	}
	return ups, warnings
}

func parseUpstream(name string, entry json.RawMessage) (*upstream, string) {
	if name == "" {
		return nil, "an MCP server entry has an empty name"
	}
	var e map[string]json.RawMessage
	if json.Unmarshal(entry, &e) != nil || e == nil {
		return nil, fmt.Sprintf("MCP server %q: the entry is not an object", name)
	}
	if _, ok := e["command"]; ok {
		return nil, fmt.Sprintf(`MCP server %q: stdio servers ("command") are not supported; give an http:// url on loopback`, name)
	}
	var rawURL, prefix string
	if json.Unmarshal(e["url"], &rawURL) != nil || rawURL == "" {
		return nil, fmt.Sprintf(`MCP server %q: "url" is missing or not a string`, name)
	}
	if p, ok := e["prefix"]; ok && string(p) != "null" && json.Unmarshal(p, &prefix) != nil {
		return nil, fmt.Sprintf(`MCP server %q: "prefix" is not a string`, name)
	}
	pu, err := url.Parse(rawURL)
	host := ""
	if err == nil {
		host = loopbackName(pu.Hostname())
	}
	if err != nil || pu.Scheme != "http" || host == "" {
		return nil, fmt.Sprintf("MCP server %q: url %q skipped: only http:// on 127.0.0.1, localhost or [::1] is accepted", name, redact.URL(rawURL))
	}
	// Requests go to the name as accepted, written as it is checked: a
	// trailing dot would make "127.0.0.1." a name to resolve.
	switch port := pu.Port(); {
	case port != "":
		pu.Host = net.JoinHostPort(host, port)
	case host == "::1":
		pu.Host = "[::1]"
	default:
		pu.Host = host
	}
	key := name + "_"
	if prefix != "" {
		key = prefix + "_"
	}
	return &upstream{name: name, prefix: prefix, key: key, url: pu.String(), display: redact.URL(pu.String())}, ""
}

// loopbackName returns the loopback host name h stands for (127.0.0.1,
// localhost or ::1, compared without case and without one trailing
// dot), or "" when it is none of them.
func loopbackName(h string) string {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	switch h {
	case "127.0.0.1", "localhost", "::1":
		return h
	}
	return ""
}

// upstreamClient talks to loopback servers only: no proxy, short dials,
// and no redirects: a 3xx is the answer (a bad upstream), so a loopback
// server cannot send the daemon's requests on to another host.
func upstreamClient() *http.Client {
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Transport: &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: callTimeout,
	}}
}

// route finds the upstream a tool name belongs to and the name to
// forward: the upstream whose key (<prefix>_, or <name>_ without a
// prefix) is the longest that starts the name, the first registered on a
// tie. It goes by prefix, not by the last list, so an upstream that was
// down then is still reached; the list applies the same rule (listOne),
// so every listed name is routed back to the upstream that listed it.
func (s *Server) route(name string) (*upstream, string) {
	var best *upstream
	for _, u := range s.upstreams {
		if strings.HasPrefix(name, u.key) && (best == nil || len(u.key) > len(best.key)) {
			best = u
		}
	}
	switch {
	case best == nil:
		return nil, ""
	case best.prefix != "":
		return best, name[len(best.key):]
	}
	return best, name
}

// listUpstreams asks every upstream for its tools at once, each within
// listTimeout, and returns them in registration order, renamed; an
// upstream that fails contributes nothing.
func (s *Server) listUpstreams(ctx context.Context) []upTool {
	if len(s.upstreams) == 0 || isHop(ctx) {
		return nil
	}
	parts := make([][]upTool, len(s.upstreams))
	var wg sync.WaitGroup
	for i, u := range s.upstreams {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, listTimeout)
			defer cancel()
			tools, err := s.listOne(ctx, u)
			if err != nil {
				s.log.Debug("MCP upstream left out of tools/list", "name", u.name, "url", u.display, "reason", err)
			}
			parts[i] = tools
		})
	}
	wg.Wait()
	var all []upTool
	for _, p := range parts {
		all = append(all, p...)
	}
	return all
}

func (s *Server) listOne(ctx context.Context, u *upstream) ([]upTool, error) {
	var out []upTool
	cursor := ""
	for range maxListPages {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		res, rerr, err := s.rpc(ctx, u, "tools/list", params)
		if err != nil {
			return out, err
		}
		if rerr != nil {
			return out, fmt.Errorf("tools/list answered error %d", rerr.Code)
		}
		var page struct {
			Tools      []map[string]json.RawMessage `json:"tools"`
			NextCursor string                       `json:"nextCursor"`
		}
		if json.Unmarshal(res, &page) != nil {
			return out, errors.New("tools/list answer is not a tool list")
		}
		for _, t := range page.Tools {
			var name string
			if json.Unmarshal(t["name"], &name) != nil || name == "" {
				continue
			}
			published := name
			if u.prefix != "" {
				published = u.prefix + "_" + name
			}
			if r, _ := s.route(published); r != u {
				continue // a call to it would go elsewhere, or nowhere
			}
			t["name"] = marshal(published)
			out = append(out, upTool{name: published, raw: marshal(t)})
		}
		if page.NextCursor == "" {
			return out, nil
		}
		cursor = page.NextCursor
	}
	return out, nil
}

// forward sends a tools/call of name (the published name the client
// sent, less u's prefix) to u and passes its answer back: a result
// unedited, a JSON-RPC error as the call's error (an "unknown tool"
// naming name is reworded to name published). An upstream that cannot
// be reached, answers something that is not the response to this
// request, or a result that is not a JSON object, is a result with
// isError. The caller's cancellation ends the upstream request.
func (s *Server) forward(ctx context.Context, u *upstream, published, name string, args json.RawMessage) (json.RawMessage, *rpcError) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	params := map[string]any{"name": name}
	if a := compact(args); len(a) > 0 && string(a) != "null" {
		params["arguments"] = a
	}
	res, rerr, err := s.rpc(ctx, u, "tools/call", params)
	switch {
	case errors.Is(err, errInvalidAnswer) || (err == nil && rerr == nil && !isObject(res)):
		s.log.Info("MCP upstream answered an invalid result", "name", u.name, "url", u.display)
		return marshal(failure(fmt.Sprintf("MCP server %q answered an invalid result", u.name))), nil
	case err != nil:
		s.log.Info("MCP upstream call failed", "name", u.name, "url", u.display, "reason", err)
		return marshal(failure(fmt.Sprintf("MCP server %q (%s) did not answer: %s", u.name, u.display, err))), nil
	case rerr != nil:
		// An upstream's "unknown tool" names what it was sent; the client
		// sent the published name.
		if rerr.Code == codeInvalidParams && (rerr.Message == "unknown tool: "+name || rerr.Message == fmt.Sprintf("unknown tool %q", name)) {
			rerr.Message = "unknown tool: " + published
		}
		return nil, rerr
	}
	return res, nil
}

// rpc sends one JSON-RPC request to u: one POST, no session, no
// handshake. It asks for JSON; a server that insists on both media types
// (a stateless streamable-HTTP server) is asked again accepting an event
// stream, whose response event is read. err words transport failures in
// the daemon's terms (never Go's text).
func (s *Server) rpc(ctx context.Context, u *upstream, method string, params any) (json.RawMessage, *rpcError, error) {
	id := u.ids.Add(1)
	body := marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	res, rerr, status, err := s.post(ctx, u, body, id, "application/json")
	if err != nil && (status == http.StatusNotAcceptable || status == http.StatusBadRequest) {
		res, rerr, _, err = s.post(ctx, u, body, id, "application/json, text/event-stream")
	}
	return res, rerr, err
}

func (s *Server) post(ctx context.Context, u *upstream, body []byte, id int64, accept string) (json.RawMessage, *rpcError, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.url, bytes.NewReader(body))
	if err != nil {
		return nil, nil, 0, errors.New("bad request url")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	req.Header.Set(HopHeader, "1")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, nil, 0, transportReason(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			return nil, nil, resp.StatusCode, fmt.Errorf("HTTP %d, a redirect (not followed)", resp.StatusCode)
		}
		return nil, nil, resp.StatusCode, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	rd := io.LimitReader(resp.Body, maxUpstreamBody)
	var msg []byte
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		msg, err = sseResponse(rd, id)
	} else {
		msg, err = io.ReadAll(rd)
	}
	if err != nil {
		return nil, nil, resp.StatusCode, transportReason(ctx, err)
	}
	var r struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *rpcError       `json:"error"`
	}
	if json.Unmarshal(msg, &r) != nil || (r.Result == nil && r.Error == nil) || string(compact(r.ID)) != strconv.FormatInt(id, 10) {
		return nil, nil, resp.StatusCode, errInvalidAnswer
	}
	if r.Error != nil {
		return nil, r.Error, resp.StatusCode, nil
	}
	return r.Result, nil, resp.StatusCode, nil
}

// isObject reports whether raw JSON is an object (a tools/call result
// must be one).
func isObject(raw json.RawMessage) bool {
	raw = compact(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// sseResponse reads an event stream up to the event holding the
// response to id.
func sseResponse(r io.Reader, id int64) ([]byte, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxUpstreamBody)
	var data bytes.Buffer
	want := fmt.Sprint(id)
	for sc.Scan() {
		line := sc.Text()
		if d, ok := strings.CutPrefix(line, "data:"); ok {
			data.WriteString(strings.TrimPrefix(d, " "))
			data.WriteByte('\n')
			continue
		}
		if line != "" || data.Len() == 0 {
			continue
		}
		var head struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(data.Bytes(), &head) == nil && string(compact(head.ID)) == want {
			return bytes.Clone(data.Bytes()), nil
		}
		data.Reset()
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, errors.New("the event stream ended without a response")
}

// transportReason words a failed exchange.
func transportReason(ctx context.Context, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		return errors.New("cancelled")
	case errors.Is(err, syscall.ECONNREFUSED):
		return errors.New("connection refused")
	case errors.Is(ctx.Err(), context.DeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return errors.New("timed out")
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return errors.New("timed out")
	}
	return errors.New("connection failed")
}
