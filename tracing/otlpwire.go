package tracing

// Field numbers of the OTLP trace messages (opentelemetry-proto 1.x:
// trace.proto, common.proto, resource.proto, trace_service.proto), for
// the encoder (encode.go), the decoder (otlp.go) and the uploader
// (upload.go): one list, so the three cannot disagree.
const (
	pbRequestResourceSpans = 1 // ExportTraceServiceRequest.resource_spans

	pbResourceSpansResource  = 1
	pbResourceSpansScope     = 2 // scope_spans
	pbResourceSpansSchemaURL = 3

	pbResourceAttrs = 1

	pbScopeSpansScope     = 1
	pbScopeSpansSpans     = 2
	pbScopeSpansSchemaURL = 3

	pbScopeName    = 1 // InstrumentationScope
	pbScopeVersion = 2
	pbScopeAttrs   = 3

	pbSpanTraceID       = 1  // bytes
	pbSpanSpanID        = 2  // bytes
	pbSpanTraceState    = 3  // string
	pbSpanParentID      = 4  // bytes
	pbSpanName          = 5  // string
	pbSpanKind          = 6  // enum
	pbSpanStart         = 7  // fixed64
	pbSpanEnd           = 8  // fixed64
	pbSpanAttrs         = 9  // KeyValue
	pbSpanDroppedAttrs  = 10 // uint32
	pbSpanEvents        = 11 // Event
	pbSpanDroppedEvents = 12 // uint32
	pbSpanLinks         = 13 // Link
	pbSpanDroppedLinks  = 14 // uint32
	pbSpanStatus        = 15 // Status
	pbSpanFlags         = 16 // fixed32

	pbEventTime         = 1 // fixed64
	pbEventName         = 2
	pbEventAttrs        = 3
	pbEventDroppedAttrs = 4

	pbLinkTraceID      = 1
	pbLinkSpanID       = 2
	pbLinkTraceState   = 3
	pbLinkAttrs        = 4
	pbLinkDroppedAttrs = 5
	pbLinkFlags        = 6 // fixed32

	pbStatusMessage = 2
	pbStatusCode    = 3 // enum

	pbKeyValueKey   = 1
	pbKeyValueValue = 2

	pbAnyString = 1
	pbAnyBool   = 2
	pbAnyInt    = 3
	pbAnyDouble = 4 // fixed64
	pbAnyArray  = 5 // ArrayValue
	pbAnyKvlist = 6 // KeyValueList
	pbAnyBytes  = 7

	pbListValues = 1 // ArrayValue.values, KeyValueList.values

	pbResponsePartial  = 1 // ExportTraceServiceResponse.partial_success
	pbPartialRejected  = 1 // ExportTracePartialSuccess.rejected_spans
	pbPartialMessage   = 2 // ExportTracePartialSuccess.error_message
	pbRPCStatusMessage = 2 // google.rpc.Status.message
)

// Values of Status.code.
const (
	pbStatusOK    = 1 // STATUS_CODE_OK
	pbStatusError = 2 // STATUS_CODE_ERROR
)
