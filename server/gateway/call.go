package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/a2c-smcp/a2c-go/server"
	"github.com/a2c-smcp/a2c-go/smcp"
	"github.com/a2c-smcp/a2c-go/tracing"
)

// confirmKey names the gateway's one input request: the confirmation of
// a call its Computer leaves to the Agent (see the package
// documentation).
const confirmKey = "a2c_confirm"

// confirmState is the requestState of a 2026-07-28 confirmation round
// trip: it names the Computer and the arguments the user was shown, so
// that an answer is never taken for another call (the tool's Computer may
// have changed between the question and the retry). The gateway keeps no
// state between the rounds. It needs no secret: the client that answers
// is the user's own, and may decline or accept whatever it likes.
func confirmState(e toolEntry, args json.RawMessage) string {
	h := sha256.New()
	h.Write([]byte(e.computer))
	h.Write([]byte{0})
	h.Write([]byte(e.exposed))
	h.Write([]byte{0})
	h.Write(args)
	return "a2c-confirm:" + hex.EncodeToString(h.Sum(nil))
}

// callSeq numbers the gateway's calls in their req_ids (unique with the
// random part: see newReqID).
var callSeq atomic.Uint64

// callHandler is the SDK handler of one listed tool.
func (o *office) callHandler(e toolEntry) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		p := req.Params
		if meta := p.GetMeta(); len(meta) > 0 {
			ctx = tracing.Extract(ctx, meta)
		}
		// A session's call ends with the session (DELETE, idle close, the
		// gateway's Close), which the SDK's own Close only waits for.
		if sid := req.Session.ID(); sid != "" {
			var done func()
			ctx, done = o.track(ctx, sid, "")
			defer done()
		}
		confirmed := false
		if len(p.InputResponses) > 0 {
			// A 2026-07-28 retry: the answer counts only for the call the
			// user was shown.
			if p.RequestState != confirmState(e, p.Arguments) {
				return o.askConfirm(e, p.Arguments), nil
			}
			if !accepted(p.InputResponses[confirmKey]) {
				return refusedResult(e.exposed), nil
			}
			confirmed = true
		}
		res, code := o.call(ctx, e, p.Arguments, confirmed)
		if code != smcp.CodeToolRequiresConfirmation || confirmed {
			return res, nil
		}
		if caps := req.ClientCapabilities(); caps == nil || caps.Elicitation == nil {
			return res, nil // no way to ask: the Computer's refusal
		}
		if modern(req.Session) {
			return o.askConfirm(e, p.Arguments), nil
		}
		// A session: ask now, within the call's own budget and the
		// office's life (the SDK's round trip for older clients would wait
		// on an unanswered question for ever), so the answer is for this
		// very call.
		actx, cancel := context.WithTimeout(ctx, o.g.cfg.CallTimeout)
		defer cancel()
		stop := context.AfterFunc(o.ctx, cancel)
		defer stop()
		answer, err := req.Session.Elicit(actx, confirmRequest(e, p.Arguments))
		if err != nil || !accepted(answer) {
			return refusedResult(e.exposed), nil
		}
		res, _ = o.call(ctx, e, p.Arguments, true)
		return res, nil
	}
}

// modern reports whether the session speaks 2026-07-28 or later (input
// requests go back in the result), as the SDK decides it.
func modern(ss *sdk.ServerSession) bool {
	ip := ss.InitializeParams()
	return ip == nil || ip.ProtocolVersion >= nextRevision
}

// askConfirm is the 2026-07-28 input-required result that asks the user
// to confirm the call.
func (o *office) askConfirm(e toolEntry, args json.RawMessage) *sdk.CallToolResult {
	return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{confirmKey: confirmRequest(e, args)}, RequestState: confirmState(e, args)}
}

// accepted reports whether an answer to the confirmation is a yes: an
// accepted form whose confirm field is true.
func accepted(r sdk.InputResponse) bool {
	er, ok := r.(*sdk.ElicitResult)
	if !ok || er.Action != "accept" {
		return false
	}
	v, _ := er.Content["confirm"].(bool)
	return v
}

// confirmRequest is the elicitation that asks the user to confirm a call.
// The arguments are shown, as a person must see what runs: whole up to
// 4 KiB, else their start and their end with the length (what is cut is
// in the middle, never at the end where a command's tail would hide).
func confirmRequest(e toolEntry, args json.RawMessage) *sdk.ElicitParams {
	shown := string(args)
	if len(shown) > 4096 {
		shown = fmt.Sprintf("%s … [%d bytes left out] … %s (%d bytes in all)", shown[:2048], len(shown)-3072, shown[len(shown)-1024:], len(shown))
	}
	if shown == "" {
		shown = "{}"
	}
	return &sdk.ElicitParams{
		Mode:    "form",
		Message: fmt.Sprintf("Computer %q asks you to confirm the tool call %s with the arguments %s. Run it?", e.computer, e.exposed, shown),
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"confirm": map[string]any{"type": "boolean", "title": "Run " + e.exposed, "description": "Yes runs the tool once."},
			},
			"required": []string{"confirm"},
		},
	}
}

// refusedResult is the answer to a call its user did not confirm.
func refusedResult(tool string) *sdk.CallToolResult {
	return &sdk.CallToolResult{
		IsError: true,
		Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("The call of %s was not confirmed, so it was not run.", tool)}},
		Meta:    sdk.Meta{smcp.MetaErrorCode: smcp.CodeToolRequiresConfirmation},
	}
}

// call relays one tool call to its Computer and maps the answer (see the
// package documentation); code is the A2C error code of a failed call
// (0 when none). When ctx ends first (the client cancelled, or went
// away) the Computer is told to cancel the call.
func (o *office) call(ctx context.Context, e toolEntry, args json.RawMessage, confirmed bool) (*sdk.CallToolResult, int) {
	reqID := newReqID()
	payload := smcp.ToolCallReq{ReqID: reqID, Computer: e.computer, ToolName: e.exposed, Params: args,
		Timeout: int(o.g.cfg.CallTimeout.Seconds()), Confirmed: confirmed}
	if len(args) == 0 || string(args) == "null" {
		payload.Params = nil
	}
	// A call ended by the office's end (Close, eviction) or by the client
	// is cancelled on its Computer: its process must not outlive it.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopOffice := context.AfterFunc(o.ctx, cancel)
	defer stopOffice()
	raw, err := o.g.hub.Request(ctx, o.id, o.g.caller, smcp.EventToolCall, payload)
	if raw == nil && ctx.Err() != nil {
		// Request stopped waiting when ctx ended, the call still runs:
		// tell its Computer (a cancel that comes after the answer is
		// ignored there).
		cctx, ccancel := context.WithTimeout(context.Background(), o.g.cfg.ListTimeout)
		o.g.hub.Cancel(cctx, o.id, o.g.caller, e.computer, reqID)
		ccancel()
	}
	var pe *smcp.Error
	switch {
	case errors.As(err, &pe):
		return errorResult(pe.Message, pe.Code), pe.Code
	case err != nil && ctx.Err() != nil:
		// What the client gets, if it still listens: the A2C cancelled
		// marker, as a Computer's own cancelled result has it.
		r := errorResult("The call was cancelled.", 0)
		r.Meta = sdk.Meta{smcp.MetaCancelled: true}
		return r, 0
	case err != nil:
		o.g.log.Warn("MCP gateway: a tool call could not be sent", "office", o.id, "computer", e.computer, "tool", e.exposed, "err", err)
		return errorResult("The call could not be sent to its Computer.", smcp.CodeInternal), smcp.CodeInternal
	}
	return mapResult(raw)
}

// mapResult turns a Computer's CallToolResult into MCP's: content,
// structuredContent and isError as they are, the A2C markers (its meta)
// in _meta. An answer that is no CallToolResult is a failed call.
func mapResult(raw json.RawMessage) (*sdk.CallToolResult, int) {
	var r struct {
		Content           []json.RawMessage `json:"content"`
		StructuredContent json.RawMessage   `json:"structuredContent"`
		IsError           bool              `json:"isError"`
		Meta              map[string]any    `json:"meta"`
	}
	if t := bytes.TrimSpace(raw); json.Unmarshal(t, &r) != nil || len(t) == 0 || t[0] != '{' {
		return errorResult("The Computer's answer is no tool result.", smcp.CodeToolExecutionFailed), smcp.CodeToolExecutionFailed
	}
	out := &sdk.CallToolResult{IsError: r.IsError, Content: make([]sdk.Content, 0, len(r.Content))}
	for _, c := range r.Content {
		out.Content = append(out.Content, content(c))
	}
	if out.Content == nil {
		out.Content = []sdk.Content{}
	}
	if sc := strings.TrimSpace(string(r.StructuredContent)); strings.HasPrefix(sc, "{") {
		out.StructuredContent = json.RawMessage(sc) // MCP's structured content is an object; anything else is dropped
	}
	code := 0
	if len(r.Meta) > 0 {
		out.Meta = sdk.Meta(r.Meta)
		if f, ok := r.Meta[smcp.MetaErrorCode].(float64); ok {
			code = int(f)
		}
	}
	return out, code
}

// wireContent is an MCP content item of a tool result as the Computer
// sent it: the fields of the five kinds a CallToolResult holds.
type wireContent struct {
	Type        string                `json:"type"`
	Text        *string               `json:"text"`
	MIMEType    string                `json:"mimeType"`
	Data        []byte                `json:"data"`
	Resource    *sdk.ResourceContents `json:"resource"`
	URI         string                `json:"uri"`
	Name        string                `json:"name"`
	Title       string                `json:"title"`
	Description string                `json:"description"`
	Size        *int64                `json:"size"`
	Meta        sdk.Meta              `json:"_meta"`
	Annotations *sdk.Annotations      `json:"annotations"`
	Icons       []sdk.Icon            `json:"icons"`
}

// content reads one content item into the SDK's type of its kind (as the
// SDK's own decoding does, without its cost: the SDK allocates a 32 KiB
// buffer for each value it decodes). An item of no known kind, or one
// that does not decode, is kept as text holding its JSON.
func content(raw json.RawMessage) sdk.Content {
	var w wireContent
	if json.Unmarshal(raw, &w) == nil {
		switch w.Type {
		case "text":
			if w.Text != nil {
				return &sdk.TextContent{Text: *w.Text, Meta: w.Meta, Annotations: w.Annotations}
			}
		case "image":
			return &sdk.ImageContent{Data: w.Data, MIMEType: w.MIMEType, Meta: w.Meta, Annotations: w.Annotations}
		case "audio":
			return &sdk.AudioContent{Data: w.Data, MIMEType: w.MIMEType, Meta: w.Meta, Annotations: w.Annotations}
		case "resource_link":
			return &sdk.ResourceLink{URI: w.URI, Name: w.Name, Title: w.Title, Description: w.Description, MIMEType: w.MIMEType,
				Size: w.Size, Meta: w.Meta, Annotations: w.Annotations, Icons: w.Icons}
		case "resource":
			if w.Resource != nil {
				return &sdk.EmbeddedResource{Resource: w.Resource, Meta: w.Meta, Annotations: w.Annotations}
			}
		}
	}
	return &sdk.TextContent{Text: string(raw)}
}

// errorResult is a failed call's result with the A2C code in _meta
// (none when code is 0).
func errorResult(msg string, code int) *sdk.CallToolResult {
	r := &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: msg}}}
	if code != 0 {
		r.Meta = sdk.Meta{smcp.MetaErrorCode: code}
	}
	return r
}

// newReqID is a fresh req_id for a gateway call: random, with a sequence
// number for the logs.
func newReqID() string {
	return fmt.Sprintf("mcp-%d-%s", callSeq.Add(1), strings.TrimPrefix(server.NewReqID(), "console-"))
}
