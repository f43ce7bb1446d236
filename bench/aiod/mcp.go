package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/a2c-smcp/a2c-go/bench/internal/lat"
)

// benchMCP times `echo hi` through POST /mcp (sandbox_execute_bash as a
// plain-JSON JSON-RPC call: no SSE, no session) beside the same command
// through POST /v2/commands (sync), interleaved in blocks within one run
// so that both paths see the same machine state. What /mcp adds is the
// difference of the p50s (target <= 0.3 ms).
func benchMCP(base string, calls int) {
	var id atomic.Int64
	viaMCP := func() error {
		text, err := mcpCall(base, id.Add(1), "sandbox_execute_bash", map[string]any{"cmd": "echo hi"})
		if err != nil {
			return err
		}
		var r struct {
			Status   string `json:"status"`
			Output   string `json:"output"`
			ExitCode *int   `json:"exit_code"`
		}
		if err := json.Unmarshal([]byte(text), &r); err != nil || r.Status != "completed" || r.ExitCode == nil || *r.ExitCode != 0 || r.Output != "hi\n" {
			return fmt.Errorf("/mcp echo hi: %s", text)
		}
		return nil
	}
	viaHTTP := func() error {
		data, err := postJSON(base+"/v2/commands", map[string]any{"command": "echo hi"})
		if err == nil && (data["stdout"] != "hi\n" || data["exit_code"] != 0.0) {
			err = fmt.Errorf("/v2/commands: %v", data)
		}
		return err
	}
	ping := func() error {
		_, err := mcpRPC(base, id.Add(1), "ping", nil)
		return err
	}
	s, err := lat.Interleave(calls, 50, viaHTTP, viaMCP, ping)
	check(err)
	h, m, p := s[0], s[1], s[2]
	fmt.Printf("### MCP: `echo hi` through POST /mcp beside POST /v2/commands (%d calls each, interleaved in blocks of 50)\n\n", calls)
	fmt.Println("| path | p50 | p99 |")
	fmt.Println("|---|---:|---:|")
	fmt.Printf("| POST /v2/commands (sync) | %s | %s |\n", lat.US(h.P50()), lat.US(h.P99()))
	fmt.Printf("| POST /mcp tools/call sandbox_execute_bash (plain JSON) | %s | %s |\n", lat.US(m.P50()), lat.US(m.P99()))
	fmt.Printf("| POST /mcp ping (the JSON-RPC floor) | %s | %s |\n", lat.US(p.P50()), lat.US(p.P99()))
	fmt.Printf("\n- /mcp adds at p50: %s (target <= 300 µs); p50 ratio %.2fx; at p99: %s\n\n",
		lat.US(m.P50()-h.P50()), float64(m.P50())/float64(h.P50()), lat.US(m.P99()-h.P99()))
}

// mcpRPC posts one JSON-RPC request to /mcp as a plain JSON client and
// returns its result.
func mcpRPC(base string, id int64, method string, params any) (json.RawMessage, error) {
	req := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		req["params"] = params
	}
	b, _ := json.Marshal(req)
	resp, err := client.Post(base+"/mcp", "application/json", bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("/mcp %s: %d: %w", method, resp.StatusCode, err)
	}
	if resp.StatusCode != 200 || r.Error != nil || r.Result == nil {
		return nil, fmt.Errorf("/mcp %s: %d %+v", method, resp.StatusCode, r.Error)
	}
	return r.Result, nil
}

// mcpCall calls a tool through /mcp and returns the text of its single
// text content; a result with isError is an error.
func mcpCall(base string, id int64, tool string, args map[string]any) (string, error) {
	raw, err := mcpRPC(base, id, "tools/call", map[string]any{"name": tool, "arguments": args})
	if err != nil {
		return "", err
	}
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || r.IsError || len(r.Content) != 1 || r.Content[0].Type != "text" {
		return "", fmt.Errorf("/mcp %s: %s", tool, raw)
	}
	return r.Content[0].Text, nil
}
