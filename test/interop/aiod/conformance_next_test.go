package aiod

import (
	"testing"

	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// The 2026-07-28 requirement set of the conformance suite
// (conformanceNextEntry, --requirements 2026-07-28: every scenario the
// revision requires, plus the pending and extension ones it runs without
// scoring) against aiod's POST /mcp. Every scenario the suite runs is in
// exactly one of the three lists below, so a new one cannot go unseen.

// nextPass are the scenarios every check of which must pass (SUCCESS,
// INFO or SKIPPED; no FAILURE, no WARNING).
var nextPass = []string{
	"tools-list",
	"server-sse-multiple-streams",
	"dns-rebinding-protection",
	"http-header-validation",
	"input-required-result-unsupported-methods",
	"input-required-result-validate-input",
	"tasks-status-notifications",
}

// nextPartial are scenarios run in full whose other checks must pass, but
// some checks of which cannot on a tools-only server without the suite's
// fixture tools: each such check id with its reason. A listed check that
// passes fails the test, so the list stays true.
var nextPartial = map[string]map[string]string{
	"server-stateless": {
		"sep-2575-server-rejects-undeclared-capability":          "needs the suite's diagnostic tool test_missing_capability",
		"sep-2575-missing-capability-http-400":                   "needs the suite's diagnostic tool test_missing_capability",
		"sep-2575-http-server-no-independent-requests-on-stream": "needs the suite's diagnostic tool test_streaming_elicitation (elicitation)",
		"sep-2575-server-no-log-without-loglevel":                "needs the suite's diagnostic tool test_logging_tool (logging)",
	},
	"caching": {
		"sep-2549-prompts-list-caching-hints":             "prompts: aiod serves tools only (-32601)",
		"sep-2549-resources-list-caching-hints":           "resources: aiod serves tools only (-32601)",
		"sep-2549-resources-templates-list-caching-hints": "resource templates: aiod serves tools only (-32601)",
	},
	"sep-2164-resource-not-found": {
		// WARNINGs (SHOULD): -32602 with data.uri is for a server with
		// resources; one without the capability answers -32601.
		"sep-2164-error-code": "resources: aiod serves none, so resources/read is -32601 (method not found), not -32602",
		"sep-2164-data-uri":   "resources: no resource error, so no data.uri",
	},
	"input-required-result-ignore-extra-params": {
		"sep-2322-ignore-unexpected-params": "needs the fixture tool test_input_required_result_elicitation (a WARNING)",
	},
	"input-required-result-missing-input-response": {
		"sep-2322-missing-response-rerequests": "needs an InputRequiredResult fixture tool (a WARNING)",
	},
}

// nextLeftOut are the scenarios whose checks are not held at all, each
// with what it needs that a tools-only server without the suite's
// fixtures lacks.
var nextLeftOut = map[string]string{
	"completion-complete":                           "completions",
	"tools-call-simple-text":                        "the fixture tool test_simple_text",
	"tools-call-image":                              "the fixture tool test_image_content",
	"tools-call-audio":                              "the fixture tool test_audio_content",
	"tools-call-embedded-resource":                  "the fixture tool test_embedded_resource",
	"tools-call-mixed-content":                      "the fixture tool test_multiple_content_types",
	"tools-call-error":                              "the fixture tool test_error_handling",
	"tools-call-with-progress":                      "progress, and the fixture tool test_tool_with_progress",
	"resources-list":                                "resources",
	"resources-read-text":                           "resources",
	"resources-read-binary":                         "resources",
	"resources-templates-read":                      "resource templates",
	"prompts-list":                                  "prompts",
	"prompts-get-simple":                            "prompts",
	"prompts-get-with-args":                         "prompts",
	"prompts-get-embedded-resource":                 "prompts",
	"prompts-get-with-image":                        "prompts",
	"input-required-result-basic-elicitation":       "an InputRequiredResult fixture tool (elicitation)",
	"input-required-result-basic-sampling":          "an InputRequiredResult fixture tool (sampling)",
	"input-required-result-basic-list-roots":        "an InputRequiredResult fixture tool (roots)",
	"input-required-result-request-state":           "an InputRequiredResult fixture tool",
	"input-required-result-multiple-input-requests": "an InputRequiredResult fixture tool",
	"input-required-result-multi-round":             "an InputRequiredResult fixture tool",
	"input-required-result-non-tool-request":        "prompts (prompts/get asking for input)",
	"input-required-result-result-type":             "an InputRequiredResult fixture tool",
	"input-required-result-tampered-state":          "an InputRequiredResult fixture tool",
	"input-required-result-capability-check":        "an InputRequiredResult fixture tool",
	"json-schema-2020-12":                           "the fixture tool json_schema_2020_12_tool (pending, not scored)",
	"http-custom-header-server-validation":          "a tool with x-mcp-header annotations (pending, not scored)",
	"tasks-lifecycle":                               "the tasks extension and its fixture tools (extension, not scored)",
	"tasks-capability-negotiation":                  "the tasks extension (extension, not scored)",
	"tasks-wire-fields":                             "the tasks extension (extension, not scored)",
	"tasks-request-state-removal":                   "the tasks extension (extension, not scored)",
	"tasks-mrtr-input":                              "the tasks extension (extension, not scored)",
	"tasks-request-headers":                         "the tasks extension (extension, not scored)",
	"tasks-dispatch-and-envelope":                   "the tasks extension (extension, not scored)",
	"tasks-required-task-error":                     "the tasks extension (extension, not scored)",
	"tasks-mrtr-composition":                        "the tasks extension (extension, not scored)",
}

// TestAiodMCPConformanceNext runs the suite's 2026-07-28 requirement set
// once against aiod's POST /mcp and holds every scenario to its list.
func TestAiodMCPConformanceNext(t *testing.T) {
	entry := harness.RequireNodePeer(t, harness.ConformanceNextEntry, "npm conformance-next (@modelcontextprotocol/conformance@0.2.0-alpha.12)")
	node := harness.RequireNode24(t)
	d := startAiod(t, nil, "--workspace", t.TempDir())
	harness.HoldConformanceNext(t, node, entry, d.URL+"/mcp", harness.NextLists{Pass: nextPass, Partial: nextPartial, LeftOut: nextLeftOut}, d.Logs)
}
