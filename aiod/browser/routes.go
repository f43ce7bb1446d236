package browser

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
	"github.com/a2c-smcp/a2c-go/aiod/internal/serde"
)

// Mount registers the browser routes on mux, under /v1/browser/ and
// /v2/browser/ alike (POST /v1/browser/actions is the computer-use
// plane's; there is no /v2/browser/actions).
func (p *Plane) Mount(mux *http.ServeMux) {
	if p.cdp != nil {
		mux.Handle(CDPPrefix, p.cdp)
		mux.Handle(CDPPrefix+"/", p.cdp)
	}
	for _, v := range []string{"v1", "v2"} {
		pre := "/" + v + "/browser/"
		v1 := v == "v1"
		mux.HandleFunc("GET "+pre+"info", func(w http.ResponseWriter, r *http.Request) { p.serveInfo(w, r, v1) })
		mux.Handle("GET "+pre+"screenshot", api.Route[screenshotQuery, *shot]{From: api.FromQuery, Op: p.screenshot, Reply: writeShot, Log: p.log})
		mux.Handle("POST "+pre+"navigate", api.Route[navigateBody, navigated]{Decode: jsonBody[navigateBody], Op: p.navigate,
			Reply: message[navigated]("Navigated"), Log: p.log})
		mux.Handle("POST "+pre+"evaluate", api.Route[evaluateBody, evaluated]{Decode: jsonBody[evaluateBody], Op: p.evaluate, Log: p.log})
		mux.Handle("POST "+pre+"snapshot", api.Route[snapshotBody, *Node]{Decode: jsonBody[snapshotBody], Op: p.snapshot, Log: p.log})
		mux.Handle("POST "+pre+"click", api.Route[elementBody, any]{Decode: jsonBody[elementBody], Op: p.click, Reply: message[any]("Clicked"), Log: p.log})
		mux.Handle("POST "+pre+"fill", api.Route[fillBody, any]{Decode: jsonBody[fillBody], Op: p.fill, Reply: message[any]("Filled"), Log: p.log})
		mux.Handle("POST "+pre+"upload", api.Route[uploadBody, uploaded]{Decode: jsonBody[uploadBody], Op: p.upload, Reply: message[uploaded]("Uploaded"), Log: p.log})
		mux.Handle("POST "+pre+"config", api.Route[configBody, configured]{Decode: jsonBody[configBody], Op: p.config, Log: p.log})
		mux.Handle("POST "+pre+"cdp", api.Route[cdpBody, json.RawMessage]{Decode: jsonBody[cdpBody], Op: p.rawCDP, Log: p.log})
		mux.Handle("GET "+pre+"tabs", api.Route[struct{}, []Tab]{From: api.FromNothing, Op: func(r *http.Request, _ struct{}) ([]Tab, error) { return p.tabs(r.Context()) }, Log: p.log})
		mux.Handle("POST "+pre+"tabs", api.Route[newTabBody, Tab]{Decode: jsonBody[newTabBody], Op: p.newTab, Log: p.log})
		mux.Handle("POST "+pre+"tabs/{id}/activate", api.Route[struct{}, Tab]{From: api.FromNothing, Op: p.activateTab, Log: p.log})
		if v1 {
			// The Python AIO SDK's browser_tabs.activate(index).
			mux.Handle("PUT "+pre+"tabs/{id}/activate", api.Route[struct{}, Tab]{From: api.FromNothing, Op: p.activateTab, Log: p.log})
		}
		mux.Handle("DELETE "+pre+"tabs/{id}", api.Route[struct{}, Tab]{From: api.FromNothing, Op: p.closeTab, Log: p.log})
		mux.Handle("POST "+pre+"cookies", api.Route[setCookiesBody, cookieCount]{Decode: jsonBody[setCookiesBody], Op: p.setCookies, Log: p.log})
		mux.Handle("GET "+pre+"cookies", api.Route[cookiesQuery, []json.RawMessage]{From: api.FromQuery, Op: p.cookies, Log: p.log})
		mux.Handle("DELETE "+pre+"cookies", api.Route[deleteCookiesQuery, cookieCount]{From: api.FromQuery,
			Op: func(r *http.Request, in deleteCookiesQuery) (cookieCount, error) { return p.deleteCookies(r, in, v1) }, Log: p.log})
		mux.Handle("GET "+pre+"network/requests", api.Route[networkQuery, []Request]{From: api.FromQuery, Op: p.requests, Log: p.log})
	}
}

// message answers a success with the route's own message.
func message[T any](msg string) func(w http.ResponseWriter, r *http.Request, out T) {
	return func(w http.ResponseWriter, _ *http.Request, out T) { api.OKMessage(w, msg, out) }
}

// jsonBody decodes a JSON body with the daemon's reader (api.DecodeBody:
// 413 past api.MaxJSONBody, a missing body reads as {}): a body that is
// not JSON is a 400 (the published plane's rule), a field of the wrong
// type or a missing required one the 422 validation body.
func jsonBody[In any](w http.ResponseWriter, r *http.Request, in *In) error {
	return notJSON(api.DecodeBody(w, r, in, nil))
}

// notJSON words a body that did not parse as JSON as the plane's 400;
// any other error passes.
func notJSON(err error) error {
	var se *serde.Error
	if errors.As(err, &se) && se.Type == serde.TypeJSONDecode {
		return api.NewError(api.ErrInvalid, "browser: the request body is not JSON")
	}
	return err
}

func (p *Plane) serveInfo(w http.ResponseWriter, r *http.Request, v1 bool) {
	info, err := p.Info(r.Context(), r, CDPPrefix, v1)
	if err != nil {
		// Never 503: a client reads the failure from success and
		// message. data keeps the schema's shape (an object with the
		// required keys, empty), so a client that decodes it whole still
		// can; cdp_url "" says there is nothing to connect to.
		msg, hint := api.MessageOf(err)
		empty := &Info{}
		if v1 {
			empty.VNCURL = new(string)
		}
		api.Fail(w, http.StatusOK, msg, empty, hint)
		return
	}
	api.OK(w, info)
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// --- navigate

type navigateBody struct {
	URL       *string  `json:"url"`
	History   *string  `json:"history" serde:"enum=back|forward|reload"`
	WaitUntil *string  `json:"wait_until" serde:"enum=load|domcontentloaded|networkidle|commit"`
	Timeout   *float64 `json:"timeout"`
	TabID     *string  `json:"tab_id"`
}

type navigated struct {
	URL     string `json:"url"`
	FrameID string `json:"frame_id"`
}

// maxNavigateTimeout bounds navigate's timeout (seconds).
const maxNavigateTimeout = 300

// lifecycleNames maps wait_until to Chrome's lifecycle event.
var lifecycleNames = map[string]string{"load": "load", "domcontentloaded": "DOMContentLoaded", "networkidle": "networkIdle", "commit": ""}

func (p *Plane) navigate(r *http.Request, in navigateBody) (navigated, error) {
	if in.URL == nil && in.History == nil {
		return navigated{}, api.NewError(api.ErrInvalid, "browser: url or history is required")
	}
	if in.URL != nil && strings.TrimSpace(*in.URL) == "" {
		return navigated{}, serde.ValueError("url must not be empty", "body", "url")
	}
	timeout := 30.0
	if in.Timeout != nil {
		if *in.Timeout <= 0 || *in.Timeout > maxNavigateTimeout {
			return navigated{}, serde.ValueError("timeout must be greater than 0 and at most 300 seconds", "body", "timeout")
		}
		timeout = *in.Timeout
	}
	wait := lifecycleNames["load"]
	if in.WaitUntil != nil {
		wait = lifecycleNames[*in.WaitUntil]
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Duration(timeout*float64(time.Second)))
	defer cancel()
	c, s, err := p.session(ctx, str(in.TabID))
	if err != nil {
		return navigated{}, navFailed(err, timeout)
	}
	frame := c.tabOf(s)
	sub := c.subscribe(s) // p.session enabled Page and its lifecycle events (see watch)
	defer c.unsubscribe(sub)
	out := navigated{FrameID: frame}
	var loader string
	var errPage bool
	if in.URL != nil {
		var res struct {
			FrameID   string `json:"frameId"`
			LoaderID  string `json:"loaderId"`
			ErrorText string `json:"errorText"`
		}
		if err := c.call(ctx, s, "Page.navigate", map[string]any{"url": *in.URL}, &res); err != nil {
			return navigated{}, navFailed(err, timeout)
		}
		out.URL = *in.URL
		if res.FrameID != "" {
			out.FrameID = res.FrameID
		}
		if res.LoaderID == "" { // same document: nothing loads
			return out, nil
		}
		loader, errPage = res.LoaderID, res.ErrorText != ""
	} else {
		u, err := p.history(ctx, c, s, *in.History)
		if err != nil {
			return navigated{}, navFailed(err, timeout)
		}
		out.URL = u
	}
	if wait == "" {
		return out, nil
	}
	if errPage { // the error page loads quickly or not at all; either way the navigation is over
		ectx, ecancel := context.WithTimeout(ctx, 3*time.Second)
		defer ecancel()
		_ = awaitLifecycle(ectx, sub, out.FrameID, loader, wait)
		return out, nil
	}
	if err := awaitLifecycle(ctx, sub, out.FrameID, loader, wait); err != nil {
		return navigated{}, navFailed(err, timeout)
	}
	return out, nil
}

// errSuperseded ends the wait of a navigation whose tab committed
// another navigation's document meanwhile.
var errSuperseded = errors.New("browser: the navigation was superseded by another navigation of the same tab")

// navFailed words a navigation's failure; its deadline is a timeout.
func navFailed(err error, timeout float64) error {
	if errors.Is(err, errSuperseded) {
		return api.NewError(api.ErrUnavailable, errSuperseded.Error()).WithHint(Hint)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return api.NewError(api.ErrUnavailable, "browser: navigation timed out after "+strconv.FormatFloat(timeout, 'f', -1, 64)+" s").WithHint(Hint)
	}
	return cdpFailed(err)
}

// history goes back, forward or reloads and returns the URL it goes to.
func (p *Plane) history(ctx context.Context, c *conn, s, dir string) (string, error) {
	if dir == "reload" {
		var res evalResult
		if err := c.call(ctx, s, "Runtime.evaluate", map[string]any{"expression": "location.href", "returnByValue": true}, &res); err != nil {
			return "", err
		}
		var u string
		jsonInto(res.Result.Value, &u)
		return u, c.call(ctx, s, "Page.reload", map[string]any{}, nil)
	}
	var h struct {
		CurrentIndex int `json:"currentIndex"`
		Entries      []struct {
			ID  int64  `json:"id"`
			URL string `json:"url"`
		} `json:"entries"`
	}
	if err := c.call(ctx, s, "Page.getNavigationHistory", nil, &h); err != nil {
		return "", err
	}
	i := h.CurrentIndex + 1
	if dir == "back" {
		i = h.CurrentIndex - 1
	}
	if i < 0 || i >= len(h.Entries) {
		return "", api.NewError(api.ErrInvalid, "browser: no history entry to go "+dir+" to")
	}
	e := h.Entries[i]
	return e.URL, c.call(ctx, s, "Page.navigateToHistoryEntry", map[string]any{"entryId": e.ID}, nil)
}

// awaitLifecycle waits for the lifecycle event name of the main frame:
// of loader when known, else of the document the frame commits next
// (Page.frameNavigated names its loader). A page restored from the
// back-forward cache and a navigation within the document fire no
// lifecycle events; they end the wait when they happen.
func awaitLifecycle(ctx context.Context, sub *subscriber, frame, loader, name string) error {
	seen := map[string]bool{} // loader+" "+name, before the loader is known
	for {
		select {
		case ev := <-sub.ch:
			switch ev.Method {
			case "Inspector.targetCrashed":
				return errCrashed
			case "Page.navigatedWithinDocument":
				if loader == "" {
					return nil
				}
			case "Page.frameNavigated":
				var p struct {
					Frame struct {
						ID       string `json:"id"`
						ParentID string `json:"parentId"`
						LoaderID string `json:"loaderId"`
					} `json:"frame"`
					Type string `json:"type"`
				}
				if json.Unmarshal(ev.Params, &p) != nil || p.Frame.ID != frame || p.Frame.ParentID != "" {
					continue
				}
				if loader != "" {
					if p.Frame.LoaderID != loader {
						// Another navigation of the tab committed: this
						// one's document will never load.
						return errSuperseded
					}
					continue
				}
				if p.Type == "BackForwardCacheRestore" {
					return nil
				}
				loader = p.Frame.LoaderID
				if seen[loader+" "+name] {
					return nil
				}
			case "Page.lifecycleEvent":
				var p struct {
					FrameID  string `json:"frameId"`
					LoaderID string `json:"loaderId"`
					Name     string `json:"name"`
				}
				if json.Unmarshal(ev.Params, &p) != nil || p.FrameID != frame {
					continue
				}
				if loader == "" {
					seen[p.LoaderID+" "+p.Name] = true
				} else if p.LoaderID == loader && p.Name == name {
					return nil
				}
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// --- evaluate

type evaluateBody struct {
	Expression   string  `json:"expression" serde:"required"`
	AwaitPromise *bool   `json:"await_promise"`
	TabID        *string `json:"tab_id"`
}

type evaluated struct {
	Value     json.RawMessage `json:"value"`
	Exception *string         `json:"exception"`
}

// remoteObject is the part of CDP's Runtime.RemoteObject the plane reads.
type remoteObject struct {
	Type                string          `json:"type"`
	Subtype             string          `json:"subtype"`
	Value               json.RawMessage `json:"value"`
	UnserializableValue string          `json:"unserializableValue"`
	Description         string          `json:"description"`
	ObjectID            string          `json:"objectId"`
}

type evalResult struct {
	Result           remoteObject `json:"result"`
	ExceptionDetails *struct {
		Text      string        `json:"text"`
		Exception *remoteObject `json:"exception"`
	} `json:"exceptionDetails"`
}

// exception is the text of a thrown value.
func (e *evalResult) exception() *string {
	d := e.ExceptionDetails
	if d == nil {
		return nil
	}
	s := d.Text
	switch {
	case d.Exception != nil && d.Exception.Description != "":
		s = d.Exception.Description
	case d.Exception != nil && len(d.Exception.Value) > 0:
		var v string
		if json.Unmarshal(d.Exception.Value, &v) != nil {
			v = string(d.Exception.Value)
		}
		s = d.Text + " " + v
	}
	return &s
}

// value is a by-value result as JSON: null for undefined, the text of a
// value JSON cannot hold (NaN, Infinity, -0, a BigInt).
func (o *remoteObject) value() json.RawMessage {
	switch {
	case o.UnserializableValue != "":
		b, _ := json.Marshal(o.UnserializableValue)
		return b
	case len(o.Value) > 0:
		return o.Value
	}
	return json.RawMessage("null")
}

// evaluateTimeout bounds an evaluation (an awaited promise included).
const evaluateTimeout = 60 * time.Second

func (p *Plane) evaluate(r *http.Request, in evaluateBody) (evaluated, error) {
	ctx, cancel := context.WithTimeout(r.Context(), evaluateTimeout)
	defer cancel()
	c, s, err := p.session(ctx, str(in.TabID))
	if err != nil {
		return evaluated{}, err
	}
	var res evalResult
	params := map[string]any{"expression": in.Expression, "returnByValue": true, "awaitPromise": in.AwaitPromise != nil && *in.AwaitPromise, "userGesture": true}
	if err := c.call(ctx, s, "Runtime.evaluate", params, &res); err != nil {
		return evaluated{}, cdpFailed(err)
	}
	out := evaluated{Value: res.Result.value(), Exception: res.exception()}
	if out.Exception != nil {
		out.Value = json.RawMessage("null")
	}
	return out, nil
}

func jsonInto(b json.RawMessage, v any) bool { return len(b) > 0 && json.Unmarshal(b, v) == nil }
