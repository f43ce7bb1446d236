package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/a2c-smcp/a2c-go/bench/internal/lat"
)

// benchMCP times `echo hi` through POST /mcp (sandbox_execute_bash as a
// plain-JSON JSON-RPC call: no SSE, no session) beside the same command
// through POST /v2/commands (sync), and the same call at MCP 2026-07-28
// (the stateless path: per-request _meta, Mcp-Method and Mcp-Name
// headers), interleaved in blocks within one run so that every path sees
// the same machine state. What /mcp adds is the difference of the p50s
// (target <= 0.3 ms); the 2026-07-28 path is held to the plain one's
// (target: no slower).
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
	viaNext := func() error {
		text, err := mcpCallNext(base, id.Add(1), "sandbox_execute_bash", map[string]any{"cmd": "echo hi"})
		if err == nil && !strings.Contains(text, `"output":"hi\n"`) {
			err = fmt.Errorf("/mcp 2026-07-28 echo hi: %s", text)
		}
		return err
	}
	s, err := lat.Interleave(calls, 50, viaHTTP, viaMCP, ping, viaNext)
	check(err)
	h, m, p, n := s[0], s[1], s[2], s[3]
	fmt.Printf("### MCP: `echo hi` through POST /mcp beside POST /v2/commands (%d calls each, interleaved in blocks of 50)\n\n", calls)
	fmt.Println("| path | p50 | p99 |")
	fmt.Println("|---|---:|---:|")
	fmt.Printf("| POST /v2/commands (sync) | %s | %s |\n", lat.US(h.P50()), lat.US(h.P99()))
	fmt.Printf("| POST /mcp tools/call sandbox_execute_bash (plain JSON) | %s | %s |\n", lat.US(m.P50()), lat.US(m.P99()))
	fmt.Printf("| POST /mcp ping (the JSON-RPC floor) | %s | %s |\n", lat.US(p.P50()), lat.US(p.P99()))
	fmt.Printf("| POST /mcp tools/call sandbox_execute_bash at 2026-07-28 (stateless, JSON answer) | %s | %s |\n", lat.US(n.P50()), lat.US(n.P99()))
	fmt.Printf("\n- /mcp adds at p50: %s (target <= 300 µs); p50 ratio %.2fx; at p99: %s\n",
		lat.US(m.P50()-h.P50()), float64(m.P50())/float64(h.P50()), lat.US(m.P99()-h.P99()))
	fmt.Printf("- 2026-07-28 / plain p50: %.2fx (%s vs %s; target <= 1x)\n\n", float64(n.P50())/float64(m.P50()), lat.US(n.P50()), lat.US(m.P50()))
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

// mcpCallNext calls a tool as an MCP 2026-07-28 client does (its _meta
// and headers) and returns the text of its single text content.
func mcpCallNext(base string, id int64, tool string, args map[string]any) (string, error) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{
		"name": tool, "arguments": args, "_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}}})
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	var r struct {
		Result struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			IsError bool `json:"isError"`
		} `json:"result"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &r) != nil || r.Result.IsError || len(r.Result.Content) != 1 {
		return "", fmt.Errorf("/mcp 2026-07-28 %s: %d %s", tool, resp.StatusCode, body)
	}
	return r.Result.Content[0].Text, nil
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
