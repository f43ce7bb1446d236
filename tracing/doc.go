// Package tracing is how the processes of an A2C-SMCP system agree on one
// trace per tool call without a field on the wire, and where they keep
// their spans when nothing collects them.
//
// # One trace per call, no new field
//
// A tool call is named by its Agent and its req_id (the specification
// makes req_id unique and never reused). Every hop derives the call's
// trace id from that pair, and the span id of each hop's own span
// ([HopAgent], [HopHub], [HopComputer]) the same way, with SHA-256 (see
// [TraceID] and [SpanID]). So the hub names the Agent's span as its
// parent, and the Computer names the hub's, though neither ever saw the
// other's span. The A2C payloads are unchanged; a peer that does not
// trace leaves a gap (a parent that is missing), nothing worse.
//
// Derived ids need the provider's help: [IDGenerator] takes them from the
// context [Start] prepares and makes random ids for every other span.
// [New] builds providers with it; a program that brings its own
// provider and wants the Agent SDK's spans joined to the hub's adds
// sdktrace.WithIDGenerator(tracing.IDGenerator()).
//
// Below the Computer, context travels the standard way: the Computer puts
// W3C trace context (traceparent, tracestate) in each MCP request's
// params._meta ([Inject]), as tracing MCP clients do, and an MCP server
// such as aiod reads it back ([Extract]).
//
// # Export and the in-memory record
//
// [New] reads the standard OTEL_* environment: spans are exported over
// OTLP/HTTP only when it asks for that, and nothing is exported
// otherwise. Spans are made with the OpenTelemetry SDK; the exporter is
// this package's own: the batch processor (batch.go) writes each span in
// OTLP's protobuf form as it ends (encode.go) and queues bytes, and the
// uploader (upload.go) posts them as the SDK's OTLP/HTTP exporter would,
// from the same variables. The hub's part of a call, the busiest path of
// all, skips SDK spans altogether: it fills a [Relay] record and hands it
// over with [RecordRelay], and the [Provider] New builds samples it,
// queues it as it is for the exporting goroutine to encode, and keeps it
// compact in its Recorder. A [Recorder] keeps the recent spans of each process in
// memory, by trace: the console of "a2c server --console" and "a2c up"
// shows them, and "a2c call --trace" prints them. The record is bounded
// by bytes as well as by counts: a span keeps at most 32 attributes in
// about 4 KiB (strings cut to 256 bytes, the rest counted in
// dropped_attributes), a trace its first 256 spans, and a Recorder the
// 4,096 most recent traces in about 64 MiB ([DefaultMaxBytes]), the
// oldest going first. [DecodeOTLP] reads a received export within the
// same bounds, skipping what it leaves out on the wire. With neither an
// exporter nor a recorder, tracing is off and costs nothing: components
// given no provider start no spans.
package tracing
