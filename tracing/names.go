package tracing

import "go.opentelemetry.io/otel/attribute"

// Span names of the hops of a tool call. The timeline of the console and
// of "a2c call --trace" shows them in this order.
const (
	SpanAgentCall    = "a2c.agent.tool_call"    // the Agent SDK's call, root
	SpanHubRelay     = "a2c.hub.relay"          // the hub, from receipt to the answer
	SpanHubQueue     = "a2c.hub.queue"          // routing until the request is on its way to the Computer
	SpanHubWire      = "a2c.hub.wire"           // from the request leaving to the Computer's answer
	SpanComputerCall = "a2c.computer.tool_call" // the Computer's handling, approval included
	SpanApproval     = "a2c.computer.approval"  // waiting for a human's approval
	SpanMCPCall      = "tools/call"             // the MCP client call, named "tools/call <tool>" (OpenTelemetry's MCP conventions)
	SpanSandboxTool  = "aiod.tool"              // aiod's MCP server running one tool
	SpanCommand      = "aiod.command"           // a command the sandbox ran
	SpanCell         = "aiod.cell"              // a code cell the sandbox ran
)

// Attribute keys the spans carry.
const (
	AttrReqID     = attribute.Key("a2c.req_id")
	AttrAgent     = attribute.Key("a2c.agent")
	AttrComputer  = attribute.Key("a2c.computer")
	AttrOffice    = attribute.Key("a2c.office")
	AttrTool      = attribute.Key("a2c.tool")
	AttrOutcome   = attribute.Key("a2c.outcome")    // one of the Outcome* values
	AttrErrorCode = attribute.Key("a2c.error_code") // the A2C error code of a failed call
	AttrConsole   = attribute.Key("a2c.console")    // the call came from the hub's console
	AttrNode      = attribute.Key("a2c.node")       // the hub node, in a cluster
	// MCP's own, from OpenTelemetry's conventions for MCP.
	AttrMCPMethod = attribute.Key("mcp.method.name")
	AttrToolName  = attribute.Key("gen_ai.tool.name")
)

// Outcomes of a call, the values of [AttrOutcome]. A span whose outcome
// is not OutcomeOK has the error status, with the outcome as its
// description (an OutcomeError one of a protocol error with its message),
// then " (error_code N)" when the call has an A2C error code. A tool's
// own text (a failed result's content, a command line) is never in a
// span: it may hold anything, secrets included.
const (
	OutcomeOK        = "ok"
	OutcomeError     = "error"     // the tool ran and failed, or the call was refused
	OutcomeTimeout   = "timeout"   // the call's deadline passed
	OutcomeCancelled = "cancelled" // the Agent cancelled it
	OutcomeGone      = "gone"      // the Computer left before answering
)
