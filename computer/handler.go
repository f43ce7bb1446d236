package computer

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2c-smcp/a2c-go/computer/config"
	"github.com/a2c-smcp/a2c-go/computer/mcphost"
	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
	"github.com/a2c-smcp/a2c-go/tracing"
)

// handler receives the office connection's events. It runs on the
// connection's reader, so every request that may wait is answered from
// its own goroutine.
type handler struct {
	c    *Computer
	down chan string
}

func (h *handler) Disconnect(_ *sio.Socket, reason string) {
	select {
	case h.down <- reason:
	default:
	}
}

func (h *handler) Event(_ *sio.Socket, e *sio.Event) {
	c := h.c
	var raw []byte
	if len(e.Args) > 0 {
		raw = e.Args[0]
	}
	switch e.Name {
	case smcp.EventToolCall:
		go c.toolCall(e, raw)
	case smcp.EventGetTools:
		var req smcp.GetToolsReq
		if c.decode(e, raw, &req) {
			answer(e, smcp.GetToolsRet{Tools: c.Tools(), ReqID: req.ReqID})
		}
	case smcp.EventGetConfig:
		var req smcp.GetComputerConfigReq
		if c.decode(e, raw, &req) {
			answer(e, c.configRet())
		}
	case smcp.EventGetResources:
		var req smcp.GetResourcesReq
		if c.decode(e, raw, &req) {
			go c.resources(e, req)
		}
	case smcp.EventGetDesktop:
		var req smcp.GetDesktopReq
		if c.decode(e, raw, &req) {
			go c.desktopRet(e, req)
		}
	case smcp.EventGetSkills:
		var req smcp.GetSkillsReq
		if c.decode(e, raw, &req) {
			go c.getSkills(e, req)
		}
	case smcp.EventGetSkill:
		var req smcp.GetSkillReq
		if c.decode(e, raw, &req) {
			go c.getSkill(e, req)
		}
	case smcp.EventPutBlob:
		if !c.profile.PutBlob {
			answer(e, smcp.NewError(smcp.CodeBadRequest, "unknown event"))
			return
		}
		c.putBlob(e, raw)
	case smcp.EventGetBlob:
		var req smcp.GetBlobReq
		if c.decode(e, raw, &req) {
			var off, max int64
			if req.ChunkOffset != nil {
				off = *req.ChunkOffset
			}
			if req.MaxChunkBytes != nil {
				max = *req.MaxChunkBytes
			}
			ret, err := c.blobs.Get(req.BlobHandle, req.Agent, off, max)
			if err != nil {
				answer(e, err)
				return
			}
			ret.ReqID = req.ReqID
			answer(e, ret)
		}
	case smcp.NotifyCancelToolCall:
		var n smcp.AgentCallData
		if json.Unmarshal(raw, &n) == nil {
			c.cancel(n.ReqID)
		}
	default:
		if e.WantsAck() {
			_ = e.Ack(sio.Message{})
		}
	}
}

// decode reads a request and checks it is addressed to this Computer,
// answering with a flat ErrorPayload when it is not usable.
func (c *Computer) decode(e *sio.Event, raw []byte, v smcp.ClientRequest) bool {
	if err := smcp.DecodeRequest(raw, v); err != nil {
		answer(e, err)
		return false
	}
	if v.Target() != c.opts.Name {
		answer(e, smcp.NewError(smcp.CodeNotFound, "request addressed to another Computer"))
		return false
	}
	return true
}

func answer(e *sio.Event, v any) {
	if !e.WantsAck() {
		return
	}
	_ = e.Ack(sio.Message{Args: []json.RawMessage{smcp.Encode(v)}})
}

func (c *Computer) configRet() smcp.GetComputerConfigRet {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ret := smcp.GetComputerConfigRet{Servers: map[string]json.RawMessage{}}
	for _, s := range c.order {
		b, _ := json.Marshal(s.Redact())
		ret.Servers[s.BundleID] = b
	}
	// A pickString's options are {label, value} objects from 0.3.2 on,
	// plain values before: the profile decides.
	for _, in := range config.Redacted(c.cfg.Inputs) {
		b, _ := smcp.EncodeInput(in, c.profile)
		ret.Inputs = append(ret.Inputs, b)
	}
	return ret
}

func (c *Computer) resources(e *sio.Event, req smcp.GetResourcesReq) {
	c.mu.RLock()
	h := c.servers[req.MCPServer]
	c.mu.RUnlock()
	if h == nil || h.up == nil {
		answer(e, smcp.MCPServerNotFound(req.MCPServer))
		return
	}
	caps := h.up.Capabilities()
	if caps == nil || caps.Resources == nil {
		if st, _ := h.up.State(); st != mcphost.Ready {
			answer(e, smcp.NewError(smcp.CodeInternal, "MCP server is not connected"))
			return
		}
		answer(e, smcp.CapabilityNotSupported(req.MCPServer, "resources"))
		return
	}
	cursor := ""
	if req.Cursor != nil {
		cursor = *req.Cursor
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	page, err := h.up.ListResources(ctx, cursor)
	if err != nil {
		answer(e, smcp.NewError(smcp.CodeInternal, "resources/list failed"))
		return
	}
	ret := smcp.GetResourcesRet{ReqID: req.ReqID}
	for _, r := range page.Resources {
		b, _ := json.Marshal(r)
		ret.Resources = append(ret.Resources, b)
	}
	if page.NextCursor != "" {
		ret.NextCursor = &page.NextCursor
	}
	answer(e, ret)
}

// cancel interrupts the in-flight call with reqID; an unknown or finished
// id is ignored.
func (c *Computer) cancel(reqID string) {
	c.mu.Lock()
	cancel := c.inflight[reqID]
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// errCancelled marks a call the Agent cancelled.
var errCancelled = errors.New("cancelled by the agent")

// toolCall runs one client:tool_call and always answers with a
// CallToolResult.
func (c *Computer) toolCall(e *sio.Event, raw []byte) {
	start := time.Now()
	var req smcp.ToolCallReq
	if err := smcp.DecodeRequest(raw, &req); err != nil {
		answer(e, smcp.ToolErrorResult(smcp.CodeBadRequest, "invalid tool call: "+err.Error()))
		return
	}
	rec := Record{ReqID: req.ReqID, Agent: req.Agent, Tool: req.ToolName, Started: start}
	c.mu.RLock()
	if r, ok := c.routes[req.ToolName]; ok {
		rec.BundleID = r.server.cfg.BundleID
	}
	c.mu.RUnlock()
	ctx := context.Background()
	var span trace.Span
	if tp := c.opts.TracerProvider; tp != nil {
		ctx, span = c.startCall(tp, &req, rec.BundleID)
	}
	res := c.runTool(ctx, req, &rec)
	rec.Duration = time.Since(start)
	rec.IsError = res.IsError
	c.record(rec)
	if span != nil {
		// Ended before the answer is written: the span is on record
		// by the time the Agent reads the result.
		endSpan(span, spanOutcome(rec.Outcome), res.ErrorCode(), "")
	}
	answer(e, res)
}

// runTool runs req within ctx (which carries the Computer's span when
// the call is traced) and fills rec's outcome.
func (c *Computer) runTool(ctx context.Context, req smcp.ToolCallReq, rec *Record) smcp.CallToolResult {
	if req.Computer != c.opts.Name {
		rec.Outcome = "refused"
		return smcp.ToolErrorResult(smcp.CodeNotFound, "tool call addressed to another Computer")
	}
	c.mu.RLock()
	r, ok := c.routes[req.ToolName]
	c.mu.RUnlock()
	if !ok {
		rec.Outcome = "refused"
		return smcp.ToolErrorResult(smcp.CodeToolNotFound, "unknown tool: "+req.ToolName)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(req.Timeout)*time.Second)
	ctx, cancelCause := context.WithCancelCause(ctx)
	defer cancel()
	c.mu.Lock()
	c.inflight[req.ReqID] = func() { cancelCause(errCancelled) }
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.inflight, req.ReqID)
		c.mu.Unlock()
	}()

	if !c.approved(ctx, r, req) {
		rec.Outcome = "refused"
		if errors.Is(context.Cause(ctx), errCancelled) {
			rec.Outcome = "cancelled"
			return smcp.CancelledResult()
		}
		return smcp.ToolErrorResult(smcp.CodeToolRequiresConfirmation, "tool call needs a confirmation that was not given")
	}
	c.log.Debug("tool call dispatched", "req_id", req.ReqID, "tool", req.ToolName, "bundle_id", r.server.cfg.BundleID)
	var args any = map[string]any{}
	if len(req.Params) > 0 && string(req.Params) != "null" {
		args = req.Params
	}
	mctx, mspan, meta := startMCP(ctx, r.server.cfg.BundleID, r.tool)
	out, err := r.server.up.CallToolMeta(mctx, r.tool, args, meta)
	switch {
	case errors.Is(context.Cause(ctx), errCancelled):
		rec.Outcome = "cancelled"
		endSpan(mspan, tracing.OutcomeCancelled, 0, "")
		return smcp.CancelledResult()
	case ctx.Err() != nil:
		rec.Outcome = "timeout"
		endSpan(mspan, tracing.OutcomeTimeout, 0, "")
		return smcp.TimeoutResult("Tool call timed out")
	case err != nil:
		rec.Outcome = "error"
		var ae *mcphost.AuthError
		if errors.As(err, &ae) {
			res := authResult(ae, r.server.cfg.BundleID)
			endSpan(mspan, tracing.OutcomeError, res.ErrorCode(), "")
			return res
		}
		endSpan(mspan, tracing.OutcomeError, 0, "")
		res := smcp.ToolErrorResult(smcp.CodeToolExecutionFailed, "tool call failed")
		res.Meta[smcp.MetaMCPServer] = r.server.cfg.BundleID
		return res
	}
	rec.Outcome = "ok"
	if out.IsError {
		rec.Outcome = "error"
	}
	res := convert(out)
	endSpan(mspan, spanOutcome(rec.Outcome), 0, "")
	c.offload(&res, req.Agent)
	return res
}

// offload replaces binary content items larger than the inline budget by
// blob handles: the item keeps its type and mimeType, loses its bytes, and
// gains _meta.a2c_blob_handle, a2c_total_size and a2c_sha256.
func (c *Computer) offload(res *smcp.CallToolResult, scope string) {
	for i, raw := range res.Content {
		var item map[string]json.RawMessage
		if json.Unmarshal(raw, &item) != nil {
			continue
		}
		var kind string
		_ = json.Unmarshal(item["type"], &kind)
		holder, field := item, "data" // image and audio carry base64 "data"
		var resource map[string]json.RawMessage
		if kind == "resource" {
			if json.Unmarshal(item["resource"], &resource) != nil {
				continue
			}
			holder, field = resource, "blob"
		} else if kind != "image" && kind != "audio" {
			continue
		}
		var b64 string
		if json.Unmarshal(holder[field], &b64) != nil || base64.StdEncoding.DecodedLen(len(b64)) <= c.opts.InlineBudget {
			continue
		}
		data, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(data) <= c.opts.InlineBudget {
			continue
		}
		var mime string
		_ = json.Unmarshal(holder["mimeType"], &mime)
		handle, sum := c.blobs.Put(data, mime, scope)
		holder[field] = json.RawMessage(`""`)
		if resource != nil {
			item["resource"], _ = json.Marshal(resource)
		}
		meta := map[string]any{}
		_ = json.Unmarshal(item["_meta"], &meta)
		meta[smcp.MetaBlobHandle], meta[smcp.MetaTotalSize], meta[smcp.MetaSHA256] = handle, len(data), sum
		item["_meta"], _ = json.Marshal(meta)
		res.Content[i], _ = json.Marshal(item)
	}
}

// authResult is the result of a call the upstream refused for want of
// authorisation (4006) or permission (4007). The hint names the server by
// its bundle_id and carries no credential, URL or OAuth parameter.
func authResult(ae *mcphost.AuthError, bundleID string) smcp.CallToolResult {
	code := ae.Code()
	action, msg := "user_authorization_required",
		"The MCP server "+bundleID+" requires authorisation; authorise it on the Computer, then retry."
	if code == smcp.CodeToolAuthorizationFailed {
		action, msg = "token_refresh_required",
			"The MCP server "+bundleID+" refused the credentials (403); renew or widen them on the Computer, then retry."
	}
	res := smcp.ToolErrorResult(code, msg)
	res.Meta[smcp.MetaMCPServer] = bundleID
	res.Meta[smcp.MetaAuthHint] = map[string]any{"action": action, "message": msg}
	return res
}

// approved applies auto_apply and the approval policy.
func (c *Computer) approved(ctx context.Context, r route, req smcp.ToolCallReq) bool {
	meta := r.server.cfg.MergedToolMeta(r.tool)
	if meta.AutoApply != nil && *meta.AutoApply {
		return true
	}
	switch c.opts.Approval {
	case ApproveAll:
		return true
	case ApproveAgent:
		return req.Confirmed
	case ApproveAsk:
		if c.opts.Confirm == nil {
			return false
		}
		cctx, cancel := context.WithTimeout(ctx, c.opts.ConfirmTimeout)
		defer cancel()
		cctx, span := child(cctx, tracing.SpanApproval)
		ok, err := c.opts.Confirm(cctx, req.ToolName, req.Params)
		if span != nil {
			endApproval(cctx, span, ok, err)
		}
		return err == nil && ok
	}
	return false
}

// convert turns the MCP SDK's result into the protocol's, moving the
// result-level _meta to meta.
func convert(out *mcp.CallToolResult) smcp.CallToolResult {
	b, err := json.Marshal(out)
	var r smcp.CallToolResult
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	if err != nil {
		return smcp.ToolErrorResult(smcp.CodeToolExecutionFailed, "undecodable tool result")
	}
	if r.Content == nil {
		r.Content = []json.RawMessage{}
	}
	return r
}

func (c *Computer) record(r Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.history = append(c.history, r)
	if n := len(c.history) - c.opts.History; n > 0 {
		c.history = append(c.history[:0:0], c.history[n:]...)
	}
}
