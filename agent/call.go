package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/a2c-smcp/a2c-go/smcp"
	"github.com/a2c-smcp/a2c-go/tracing"
)

// CallSlack is how much longer than a tool call's own timeout the Agent
// waits for its answer: a little more than the server's relay slack, so
// that the Computer's or the server's own timeout result arrives first.
const CallSlack = 6 * time.Second

// Call describes one tool call.
type Call struct {
	Computer string
	// Tool is the exposed name, {bundle_id}__{name}, as listed by Tools.
	Tool string
	// Params is the argument object; nil (also a nil map or pointer)
	// means {}.
	Params any
	// Timeout is the call's budget, rounded up to whole seconds. Default
	// 60s.
	Timeout time.Duration
	// ReqID identifies the call for cancellation; default a fresh one.
	ReqID string
}

// CallTool runs a tool on a Computer and returns its result, which may be
// a tool-level failure (IsError, with markers in Meta). A protocol error
// (unknown Computer, another office, ...) is a *smcp.Error.
//
// When the answer does not come within the timeout plus Options.CallSlack,
// CallTool sends server:tool_call_cancel and returns a result marked
// a2c_timeout. When ctx ends first, it sends the cancel and returns
// ctx.Err().
//
// When the connection is lost while the call is in flight, CallTool
// returns at once with an error matching [ErrConnectionLost] and sends no
// cancel: the Computer may still run the tool to its end, and its result
// is lost. After the Client has reconnected, [Client.Cancel] with the
// call's ReqID asks the Computer to stop it. A call made while the Client
// reconnects waits for the rejoin within its timeout and ctx; if they end
// first, the call was never sent and the error matches ErrConnectionLost
// and context.DeadlineExceeded (or ctx.Err()).
//
// With Options.TracerProvider set, the call is the root span of its trace
// (a2c.agent.tool_call, ids derived from the Agent's name and the ReqID;
// see package tracing), with the outcome ok, error, timeout or cancelled.
func (c *Client) CallTool(ctx context.Context, call Call) (*smcp.CallToolResult, error) {
	if call.ReqID == "" {
		call.ReqID = NewReqID()
	}
	if c.opts.TracerProvider == nil {
		return c.callTool(ctx, call)
	}
	sctx, span := tracing.Start(ctx, c.opts.TracerProvider.Tracer(tracerName), tracing.HopAgent, c.opts.Name, call.ReqID, tracing.SpanAgentCall,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			tracing.AttrReqID.String(call.ReqID),
			tracing.AttrAgent.String(c.opts.Name),
			tracing.AttrComputer.String(call.Computer),
			tracing.AttrTool.String(call.Tool),
			tracing.AttrOffice.String(c.Office())))
	res, err := c.callTool(sctx, call)
	endSpan(ctx, span, res, err)
	return res, err
}

// tracerName is the instrumentation scope of the Agent SDK's spans.
const tracerName = "github.com/a2c-smcp/a2c-go/agent"

// endSpan ends a call's span with its outcome (see [tracing.AttrOutcome]):
// cancelled when ctx ended first, timeout for an a2c_timeout result,
// error for a failed tool, a protocol error (its code in
// a2c.error_code), a lost connection or any other failure. A failure's
// status description is the outcome (a protocol error's message, or the
// SDK's own error), then " (error_code N)": never a tool's text.
func endSpan(ctx context.Context, span trace.Span, res *smcp.CallToolResult, err error) {
	outcome, code, msg := tracing.OutcomeOK, 0, ""
	var pe *smcp.Error
	switch {
	case err == nil && res.Timeout():
		outcome, code = tracing.OutcomeTimeout, res.ErrorCode()
	case err == nil && res.Cancelled():
		outcome, code = tracing.OutcomeCancelled, res.ErrorCode()
	case err == nil && res.IsError:
		// Not the result's text: a tool's own words may hold anything,
		// secrets included.
		outcome, code = tracing.OutcomeError, res.ErrorCode()
	case err == nil:
	case errors.Is(err, ErrConnectionLost), errors.Is(err, ErrClosed):
		outcome, msg = tracing.OutcomeError, err.Error()
	case ctx.Err() != nil:
		outcome = tracing.OutcomeCancelled
	case errors.As(err, &pe):
		outcome, code, msg = tracing.OutcomeError, pe.Code, pe.Message
	default:
		outcome, msg = tracing.OutcomeError, err.Error()
	}
	tracing.End(span, outcome, code, msg)
}

// callTool is CallTool without its span; call.ReqID is set.
func (c *Client) callTool(ctx context.Context, call Call) (*smcp.CallToolResult, error) {
	if call.Timeout <= 0 {
		call.Timeout = 60 * time.Second
	}
	secs := int((call.Timeout + time.Second - 1) / time.Second)
	params := json.RawMessage(`{}`)
	if call.Params != nil {
		b, err := json.Marshal(call.Params)
		if err != nil {
			return nil, fmt.Errorf("a2c: encode params: %w", err)
		}
		if string(b) == "null" {
			b = params // a typed nil (a nil map or pointer) is nil too
		}
		if len(b) == 0 || b[0] != '{' {
			return nil, errors.New("a2c: params must be a JSON object")
		}
		params = b
	}
	req := smcp.ToolCallReq{Agent: c.opts.Name, ReqID: call.ReqID, Computer: call.Computer, ToolName: call.Tool, Params: params, Timeout: secs}
	args, err := c.call(ctx, smcp.EventToolCall, req, time.Duration(secs)*time.Second+c.opts.CallSlack)
	switch {
	case err == nil:
	case errors.Is(err, ErrClosed), errors.Is(err, ErrConnectionLost):
		return nil, err // nothing to cancel on: see above
	case ctx.Err() != nil:
		c.cancel(call.ReqID)
		return nil, ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		c.cancel(call.ReqID)
		r := smcp.TimeoutResult(fmt.Sprintf("Tool call timed out after %ds", secs))
		return &r, nil
	default:
		return nil, err // never sent (too large for the server)
	}
	if len(args) == 0 {
		return nil, errors.New("a2c: tool call: empty answer")
	}
	if e, ok := smcp.DecodeError(args[0]); ok {
		return nil, e
	}
	var r smcp.CallToolResult
	if err := json.Unmarshal(args[0], &r); err != nil {
		return nil, fmt.Errorf("a2c: tool call: undecodable result: %w", err)
	}
	return &r, nil
}

// Cancel asks the office's Computers to cancel the call with reqID. It is
// fire-and-forget: the outcome shows in that call's own result.
func (c *Client) Cancel(ctx context.Context, reqID string) error {
	_, err := c.call(ctx, smcp.EventCancelToolCall, smcp.AgentCallData{Agent: c.opts.Name, ReqID: reqID}, 5*time.Second)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil // an old server may not answer: that is conformant
	}
	return err
}

func (c *Client) cancel(reqID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.Cancel(ctx, reqID)
}

// Blob reads a whole blob by its handle, chunk by chunk, restarting if the
// resource changes underneath (size or digest differ between chunks) and
// verifying the SHA-256 at the end. chunk is the chunk size to ask for
// (0: let the Computer choose).
func (c *Client) Blob(ctx context.Context, computer, handle string, chunk int64) ([]byte, *smcp.GetBlobRet, error) {
	var (
		buf      bytes.Buffer
		first    *smcp.GetBlobRet
		restarts int
	)
	for {
		off := int64(buf.Len())
		req := smcp.GetBlobReq{Agent: c.opts.Name, ReqID: NewReqID(), Computer: computer, BlobHandle: handle, ChunkOffset: &off}
		if chunk > 0 {
			req.MaxChunkBytes = &chunk
		}
		var ret smcp.GetBlobRet
		if err := c.request(ctx, smcp.EventGetBlob, req, &ret); err != nil {
			return nil, nil, err
		}
		if first != nil && (ret.TotalSize != first.TotalSize || ret.SHA256 != first.SHA256) {
			if restarts++; restarts > 3 {
				return nil, nil, errors.New("a2c: blob keeps changing while being read")
			}
			buf.Reset()
			first = nil
			continue
		}
		if first == nil {
			r := ret
			first = &r
		}
		data, err := base64.StdEncoding.DecodeString(ret.Blob)
		if err != nil {
			return nil, nil, fmt.Errorf("a2c: blob chunk is not base64: %w", err)
		}
		if ret.ChunkOffset != off {
			return nil, nil, fmt.Errorf("a2c: blob chunk at offset %d, asked for %d", ret.ChunkOffset, off)
		}
		buf.Write(data)
		if int64(buf.Len()) > first.TotalSize {
			return nil, nil, errors.New("a2c: blob longer than its total_size")
		}
		if ret.EOF {
			break
		}
		if len(data) == 0 {
			return nil, nil, errors.New("a2c: empty blob chunk before eof")
		}
	}
	if int64(buf.Len()) != first.TotalSize {
		return nil, nil, fmt.Errorf("a2c: blob has %d bytes, total_size says %d", buf.Len(), first.TotalSize)
	}
	sum := sha256.Sum256(buf.Bytes())
	if hex.EncodeToString(sum[:]) != first.SHA256 {
		return nil, nil, errors.New("a2c: blob sha256 mismatch")
	}
	first.Blob = ""
	first.EOF = true
	first.ChunkOffset = 0
	return buf.Bytes(), first, nil
}
