package smcp_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// A Server gates the handshake on the client's a2c_version and answers a
// refusal with the ErrorPayload as the HTTP 400 body.
func ExampleCheckVersion() {
	if e := smcp.CheckVersion("0.1.5", "0.2.0"); e != nil {
		body, _ := json.Marshal(e)
		fmt.Println(string(body))
	}
	fmt.Println(smcp.CheckVersion("0.3.1", "0.3.0") == nil)
	// Output:
	// {"code":4008,"message":"Protocol version mismatch","server_version":"0.2.0","client_version":"0.1.5","min_supported":"0.2.0","max_supported":"0.2.999"}
	// true
}

// An Agent tells a flat ErrorPayload from a successful answer by its
// top-level integer code.
func ExampleDecodeError() {
	ack := []byte(`{"code":4014,"message":"MCP Server not registered","mcp_server":"docs"}`)
	if e, ok := smcp.DecodeError(ack); ok {
		fmt.Println(e, e.MCPServer, e.MCPServerName)
		fmt.Println(errors.Is(e, &smcp.Error{Code: smcp.CodeMCPServerNotFound}))
	}
	_, ok := smcp.DecodeError([]byte(`{"tools":[],"req_id":"r1"}`))
	fmt.Println(ok)
	// Output:
	// smcp 4014: MCP Server not registered docs docs
	// true
	// false
}

// A Computer names each MCP server by its bundle_id and exposes its tools
// under bundle_id-prefixed names.
func ExampleDeriveBundleID() {
	npx := smcp.Identity{Type: "stdio", Command: "npx", Args: []string{"-y", "everything"}}
	for _, name := range []string{"My Server!", "你好世界"} {
		id := smcp.DeriveBundleID(name, npx)
		fmt.Println(id, smcp.ExposedName(id, "echo"))
	}
	// Output:
	// My_Server My_Server__echo
	// bundle_8d2a9232fa76e8a5 bundle_8d2a9232fa76e8a5__echo
}

// The Server decodes and validates a client:* request before routing it to
// the Computer it names.
func ExampleNewClientRequest() {
	raw := []byte(`{"agent":"bot","req_id":"r1","computer":"pc","tool_name":"fs__read","params":{},"timeout":0}`)
	req := smcp.NewClientRequest(smcp.EventToolCall)
	if err := smcp.DecodeRequest(raw, req); err != nil {
		fmt.Println(err)
	}
	// Output:
	// smcp 400: invalid payload: field "timeout" must be between 1 and 3600
}
