// Command toolsrv is the MCP server (stdio) that the interop scenario
// suites host in a real a2c Computer. Its tools declare ToolMeta in
// Tool._meta["a2c_tool_meta"] as an MCP server may since A2C-SMCP 0.4.0,
// so the suites can check what a Computer of each protocol version lists
// in client:get_tools:
//
//   - tagged: valid tags plus keys a server must not set (auto_apply,
//     alias, ret_object_mapper), and another native _meta key;
//   - overridden, cleared: valid tags that the suite's config replaces
//     (tool_meta tags ["cfg"], and tags [] that clear them);
//   - malformed: tags that are not a list of strings;
//   - plain: no declaration.
//
// Every tool answers its "text" argument back.
//
// With the argument --trace it has two more tools, for the trace suite:
//
//   - meta answers the params._meta of its request, as JSON text (the
//     W3C trace context the Computer passes on);
//   - sleep creates the file named by its "mark" argument, if any, then
//     waits "seconds" seconds or until the call is cancelled.
package main

import (
	"context"
	"encoding/json"
	"log"
	"os"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tools are this server's tools and their _meta.
var tools = []struct {
	name string
	meta mcp.Meta
}{
	{"tagged", mcp.Meta{
		"a2c_tool_meta": map[string]any{
			"tags":              []any{"alpha", "beta"},
			"auto_apply":        true,
			"alias":             "sneaky",
			"ret_object_mapper": map[string]any{"a": "b"},
		},
		"vendor.example/x": 1,
	}},
	{"overridden", mcp.Meta{"a2c_tool_meta": map[string]any{"tags": []any{"srv"}}}},
	{"cleared", mcp.Meta{"a2c_tool_meta": map[string]any{"tags": []any{"srv"}}}},
	{"malformed", mcp.Meta{"a2c_tool_meta": map[string]any{"tags": "not-a-list"}}},
	{"plain", nil},
}

type args struct {
	Text string `json:"text,omitempty"`
}

func main() {
	s := mcp.NewServer(&mcp.Implementation{Name: "a2c-interop-toolsrv", Version: "1.0.0"}, nil)
	for _, tl := range tools {
		mcp.AddTool(s, &mcp.Tool{Name: tl.name, Description: "Echo text (" + tl.name + ")", Meta: tl.meta},
			func(_ context.Context, _ *mcp.CallToolRequest, in args) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
			})
	}
	if slices.Contains(os.Args[1:], "--trace") {
		addTraceTools(s)
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}

type sleepArgs struct {
	Seconds float64 `json:"seconds,omitempty"`
	Mark    string  `json:"mark,omitempty"`
}

// addTraceTools adds meta and sleep (see the package doc).
func addTraceTools(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "meta", Description: "Answer the request's _meta"},
		func(_ context.Context, req *mcp.CallToolRequest, _ args) (*mcp.CallToolResult, any, error) {
			b, err := json.Marshal(req.Params.Meta)
			if err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "Wait, until cancelled"},
		func(ctx context.Context, _ *mcp.CallToolRequest, in sleepArgs) (*mcp.CallToolResult, any, error) {
			if in.Mark != "" {
				if err := os.WriteFile(in.Mark, nil, 0o600); err != nil {
					return nil, nil, err
				}
			}
			t := time.NewTimer(time.Duration(in.Seconds * float64(time.Second)))
			defer t.Stop()
			select {
			case <-t.C:
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slept"}}}, nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})
}
