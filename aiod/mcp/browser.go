package mcp

// This file holds the three browser tools (browser_get_info,
// browser_gui_screenshot, browser_gui_execute_action) and how the /mcp
// request a call came with reaches them: browser_get_info builds its
// URLs from that request's Host, X-Forwarded-* headers and query.

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"

	"github.com/a2c-smcp/a2c-go/aiod/desktop"
)

// noBrowser is what the browser tools answer without a browser plane.
const noBrowser = "no browser: this daemon has no browser plane, so browser tools cannot run " +
	"(see capabilities.browser in GET /v2/sandbox)"

// ActionTypes are the action types browser_gui_execute_action takes: the
// 22 of POST /v2/computer/actions, in the published table's order, as
// the worker (package desktop) defines them. The tool refuses any other
// before it reaches the worker, and its schema's enum lists them.
var ActionTypes = desktop.ActionTypes()

// The headers through which ServeHTTP hands a streamable-HTTP session's
// tool call what the request line and connection said (the SDK passes a
// call its request's headers only). A client's own copies are removed
// first, so they always hold the daemon's reading.
const (
	originHost   = "X-Aiod-Mcp-Origin-Host"
	originQuery  = "X-Aiod-Mcp-Origin-Query"
	originScheme = "X-Aiod-Mcp-Origin-Scheme"
)

// originKey marks a context with the /mcp request its tool call came
// with.
type originKey struct{}

func withOrigin(ctx context.Context, r *http.Request) context.Context {
	return context.WithValue(ctx, originKey{}, r)
}

// Origin is the /mcp request a tool call came with (method, URL with its
// query, Host, headers, TLS), or nil for a call through [Server.Connect].
// On a streamable-HTTP session it is rebuilt from the call's own POST.
func Origin(ctx context.Context) *http.Request {
	r, _ := ctx.Value(originKey{}).(*http.Request)
	return r
}

// markOrigin records r's request line and connection in its headers for
// the SDK's handler (see [originHost]); clearOrigin drops a client's
// copies.
func markOrigin(r *http.Request) {
	r.Header.Set(originHost, r.Host)
	r.Header.Set(originQuery, r.URL.RawQuery)
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	r.Header.Set(originScheme, scheme)
}

func clearOrigin(h http.Header) {
	h.Del(originHost)
	h.Del(originQuery)
	h.Del(originScheme)
}

// originFromHeader rebuilds the request [markOrigin] marked: nil when h
// carries no mark (an in-memory session).
func originFromHeader(h http.Header) *http.Request {
	host := h.Get(originHost)
	if host == "" {
		return nil
	}
	r := &http.Request{Method: http.MethodPost, Host: host, Header: h.Clone(),
		URL: &url.URL{Path: "/mcp", RawQuery: h.Get(originQuery)}}
	if h.Get(originScheme) == "https" {
		r.TLS = &tls.ConnectionState{}
	}
	clearOrigin(r.Header)
	return r
}

func (s *Server) browserInfo(ctx context.Context, _ []byte) result {
	if s.cfg.Browser == nil {
		return failure(noBrowser)
	}
	v, err := s.cfg.Browser.Info(ctx, Origin(ctx))
	if err != nil {
		return failure(err.Error())
	}
	return jsonResult(v, false)
}

func (s *Server) browserScreenshot(ctx context.Context, _ []byte) result {
	if s.cfg.Browser == nil {
		return failure(noBrowser)
	}
	img, mt, err := s.cfg.Browser.Screenshot(ctx)
	if err != nil {
		return failure(err.Error())
	}
	return imageResult(img, mt)
}

// actionDone is browser_gui_execute_action's answer, in this key order.
type actionDone struct {
	Status          string `json:"status"`
	ActionPerformed string `json:"action_performed"`
}

func (s *Server) browserAction(ctx context.Context, args []byte) result {
	var a struct {
		Action json.RawMessage `json:"action"`
	}
	if msg := decodeArgs(args, &a); msg != "" {
		return failure(msg)
	}
	act := compact(a.Action)
	// A client that sends the object as a JSON string is taken at its
	// word (some models do).
	var str string
	if len(act) > 0 && act[0] == '"' && json.Unmarshal(act, &str) == nil {
		act = compact(json.RawMessage(str))
	}
	if len(act) == 0 || act[0] != '{' {
		return failure("action is required: an object with action_type")
	}
	typ, msg := actionType(act)
	if msg != "" {
		return failure(msg)
	}
	if s.cfg.Browser == nil {
		return failure(noBrowser)
	}
	if err := s.cfg.Browser.Action(ctx, act); err != nil {
		return failure(err.Error())
	}
	return result{Content: []content{{Type: "text", Text: string(marshal(actionDone{Status: "success", ActionPerformed: typ}))}}}
}

// actionType reads an action's action_type; msg says what is wrong with
// it (absent, not one of [ActionTypes]).
func actionType(act json.RawMessage) (typ, msg string) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(act, &obj) != nil {
		return "", "action is required: an object with action_type"
	}
	raw, ok := obj["action_type"]
	if !ok || string(raw) == "null" || string(raw) == `""` {
		return "", "action_type is required"
	}
	if json.Unmarshal(raw, &typ) != nil {
		typ = string(raw)
	}
	if !slices.Contains(ActionTypes, typ) {
		return "", desktop.InvalidActionType(typ)
	}
	return typ, ""
}
