package computer

// This file is the plane's own client of the worker: what the MCP GUI
// tools (browser_gui_screenshot, browser_gui_execute_action) ask it,
// through the same transport and dialer as the forwarded routes.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

// ErrUnavailable is returned when the worker cannot be reached. Its text
// is the documented message with the documented hint.
var ErrUnavailable = errors.New(UnavailableMessage + " (" + UnavailableHint + ")")

// WorkerError is a refusal from the worker: its HTTP status and the
// message of its envelope.
type WorkerError struct {
	Status  int
	Message string
}

func (e *WorkerError) Error() string { return e.Message }

// maxShot bounds a screenshot read from the worker (a 4K display's PNG
// is a few MiB; the bound only keeps a broken worker from filling memory).
const maxShot = 64 << 20

// maxReply bounds any other answer read from the worker.
const maxReply = 4 << 20

// Screenshot is the worker's GET /v2/computer/screenshot: the whole
// display as the worker encodes it (PNG) and its media type.
// ErrUnavailable when the worker cannot be reached; a *WorkerError when
// it refuses.
func (p *Plane) Screenshot(ctx context.Context) ([]byte, string, error) {
	resp, err := p.call(ctx, http.MethodGet, "/v2/computer/screenshot", nil)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", refusal(resp)
	}
	img, err := io.ReadAll(io.LimitReader(resp.Body, maxShot+1))
	if err != nil {
		return nil, "", fmt.Errorf("%w: reading the screenshot: %w", ErrUnavailable, err)
	}
	if len(img) > maxShot {
		return nil, "", &WorkerError{Status: http.StatusBadGateway, Message: "the computer-use worker's screenshot is larger than 64 MiB"}
	}
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mt, "image/") {
		mt = http.DetectContentType(img)
	}
	return img, mt, nil
}

// Act is the worker's POST /v2/computer/actions with one action (its
// JSON body, as the route takes it). Nil when the worker performed it;
// ErrUnavailable when it cannot be reached; a *WorkerError with the
// worker's message when it refused the action (a bad field, an unknown
// key, ...).
func (p *Plane) Act(ctx context.Context, action []byte) error {
	resp, err := p.call(ctx, http.MethodPost, "/v2/computer/actions", action)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return refusal(resp)
	}
	var env struct {
		api.Reply
		// Success shadows Reply's: a worker answering only the 1.x
		// shape ({status, action_performed}) sends none, and that is a
		// success.
		Success *bool `json:"success"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxReply))
	if json.Unmarshal(b, &env) == nil && env.Success != nil && !*env.Success {
		return &WorkerError{Status: resp.StatusCode, Message: cmp.Or(env.Message, "the computer-use worker could not perform the action")}
	}
	return nil
}

// call sends one request to the worker. A worker that cannot be reached
// is ErrUnavailable.
func (p *Plane) call(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, p.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	p.authorize(req)
	resp, err := p.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		p.log.Debug("computer-use worker unreachable", "url", p.base, "err", err)
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return resp, nil
}

// refusal reads a worker's error answer: the message of its envelope
// (followed by each refused field of a 422), else its status.
func refusal(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxReply))
	var env struct {
		api.Reply
		Detail json.RawMessage `json:"detail"` // a FastAPI-style worker's
	}
	msg := ""
	if json.Unmarshal(b, &env) == nil {
		msg = env.Message
		if msg == "" {
			msg = detailText(env.Detail)
		}
		// A 422 names each refused field: "body.x: ...".
		var parts []string
		for _, e := range env.Errors {
			if e.Message == "" {
				continue
			}
			if len(e.Location) > 0 {
				parts = append(parts, strings.Join(e.Location, ".")+": "+e.Message)
			} else {
				parts = append(parts, e.Message)
			}
		}
		if len(parts) > 0 {
			msg = strings.TrimSpace(msg + ": " + strings.Join(parts, "; "))
			msg = strings.TrimPrefix(msg, ": ")
		}
	}
	if msg == "" {
		msg = fmt.Sprintf("the computer-use worker answered %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	return &WorkerError{Status: resp.StatusCode, Message: msg}
}

// detailText is the text of a FastAPI-style detail: a string, or the msg
// of its first entry.
func detailText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var list []struct {
		Msg string `json:"msg"`
	}
	if json.Unmarshal(raw, &list) == nil && len(list) > 0 {
		return list[0].Msg
	}
	return ""
}

// authorize presents the daemon's key on a request the plane makes on its
// own behalf.
func (p *Plane) authorize(req *http.Request) {
	if p.key != "" {
		req.Header.Set("Authorization", "Bearer "+p.key)
	}
}
