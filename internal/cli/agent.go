package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/server"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// agentFlags are the flags every agent-side command shares.
type agentFlags struct {
	server, office, name, token, authField, version string
	json                                            bool
}

func addAgentFlags(fs *flag.FlagSet) *agentFlags {
	f := &agentFlags{}
	fs.StringVar(&f.server, "server", "http://127.0.0.1:8000", "server URL")
	fs.StringVar(&f.office, "office", "default", "office to join")
	fs.StringVar(&f.name, "name", "", "Agent name (default a2c-cli-<pid>)")
	fs.StringVar(&f.token, "token", "", "credential to present (default $A2C_TOKEN)")
	fs.StringVar(&f.authField, "auth-field", "x-api-key", "auth field and header that carry the token")
	fs.BoolVar(&f.json, "json", false, "print JSON for scripts")
	f.version = smcp.ProtocolVersion
	fs.Func("protocol-version", "the A2C-SMCP version to speak ("+strings.Join(smcp.SupportedVersions(), ", ")+"; default "+smcp.ProtocolVersion+")", checkVersionFlag(&f.version))
	return f
}

// credential is the token to present: --token, else $A2C_TOKEN.
func (f *agentFlags) credential() string {
	if f.token != "" {
		return f.token
	}
	return os.Getenv("A2C_TOKEN")
}

// connect dials the server and joins the office.
func (f *agentFlags) connect(ctx context.Context) (*agent.Client, error) {
	name := f.name
	if name == "" {
		name = fmt.Sprintf("a2c-cli-%d", os.Getpid())
	}
	token := f.credential()
	o := agent.Options{Name: name, ProtocolVersion: f.version}
	if token != "" {
		o.Auth = map[string]any{f.authField: token}
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := agent.Dial(dctx, f.server, o)
	if err != nil {
		return nil, err
	}
	if err := c.Join(dctx, f.office); err != nil {
		c.Close()
		return nil, fmt.Errorf("join office %q: %w", f.office, err)
	}
	return c, nil
}

func printJSON(e *env, v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func runRoom(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "room")
	f := addAgentFlags(fs)
	if err := e.parse(fs, args); err != nil {
		return err
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	sessions, err := c.ListRoom(ctx)
	if err != nil {
		return err
	}
	// In a cluster the server also tells which node holds each member;
	// a server that cannot (an older one) leaves the column out.
	nodes := f.officeNodes(ctx)
	rows := make([]roomEntry, len(sessions))
	for i, s := range sessions {
		rows[i] = roomEntry{SessionInfo: s, Node: nodes[s.SID]}
	}
	if f.json {
		return printJSON(e, rows)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	if len(nodes) > 0 {
		fmt.Fprintln(tw, "ROLE\tNAME\tVERSION\tNODE\tSID")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Role, r.Name, r.A2CVersion, r.Node, r.SID)
		}
		return tw.Flush()
	}
	fmt.Fprintln(tw, "ROLE\tNAME\tVERSION\tSID")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Role, r.Name, r.A2CVersion, r.SID)
	}
	return tw.Flush()
}

// roomEntry is one line of `a2c room`: what server:list_room says of a
// member, and the node that holds it in a cluster.
type roomEntry struct {
	smcp.SessionInfo
	Node string `json:"node,omitempty"`
}

// officeNodes asks the server's GET /api/offices/{office} which node
// holds each member (sid -> node). It returns nil when the server runs
// alone or cannot say.
func (f *agentFlags) officeNodes(ctx context.Context) map[string]string {
	endpoint := strings.TrimSuffix(f.server, "/") + "/api/offices/" + url.PathEscape(f.office)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return nil
	}
	if t := f.credential(); t != "" {
		req.Header.Set(f.authField, t)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var info server.OfficeInfo
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&info) != nil {
		return nil
	}
	nodes := make(map[string]string)
	for _, m := range info.Members {
		if m.Node != "" {
			nodes[m.SID] = m.Node
		}
	}
	if len(nodes) == 0 {
		return nil
	}
	return nodes
}

// computers lists the Computers of the office, or just the one named.
func computers(ctx context.Context, c *agent.Client, only string) ([]string, error) {
	if only != "" {
		return []string{only}, nil
	}
	sessions, err := c.ListRoom(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range sessions {
		if s.Role == smcp.RoleComputer {
			names = append(names, s.Name)
		}
	}
	sort.Strings(names)
	return names, nil
}

// computerTools is one Computer's tool list, for --json output.
type computerTools struct {
	Computer string          `json:"computer"`
	Tools    []smcp.SMCPTool `json:"tools"`
}

func runTools(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "tools")
	f := addAgentFlags(fs)
	only := fs.String("computer", "", "only this Computer")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	names, err := computers(ctx, c, *only)
	if err != nil {
		return err
	}
	var all []computerTools
	for _, n := range names {
		tools, err := c.Tools(ctx, n)
		if err != nil {
			return fmt.Errorf("computer %s: %w", n, err)
		}
		all = append(all, computerTools{Computer: n, Tools: tools})
	}
	if f.json {
		if all == nil {
			all = []computerTools{}
		}
		return printJSON(e, all)
	}
	if len(all) == 0 {
		fmt.Fprintf(e.stdout, "no Computer in office %s\n", f.office)
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COMPUTER\tTOOL\tDESCRIPTION")
	for _, ct := range all {
		for _, t := range ct.Tools {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", ct.Computer, t.Name, firstLine(t.Description, 80))
		}
	}
	return tw.Flush()
}

func firstLine(s string, max int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > max {
		s = s[:max-1] + "…"
	}
	return s
}

func runCall(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "call")
	f := addAgentFlags(fs)
	params := fs.String("args", "{}", "tool arguments, a JSON object")
	timeout := fs.Int("timeout", 60, "tool call timeout in seconds (1-3600)")
	only := fs.String("computer", "", "Computer to call (default: the one that has the tool)")
	reqID := fs.String("req-id", "", "request id to use (default a fresh one), for a2c cancel")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{"exactly one TOOL (its exposed name) is required"}
	}
	tool := fs.Arg(0)
	var p map[string]any
	if err := json.Unmarshal([]byte(*params), &p); err != nil || p == nil {
		return usageError{"--args must be a JSON object"}
	}
	if *timeout < 1 || *timeout > smcp.MaxTimeout {
		return usageError{fmt.Sprintf("--timeout must be 1..%d", smcp.MaxTimeout)}
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	computer := *only
	if computer == "" {
		if computer, err = findTool(ctx, c, tool); err != nil {
			return err
		}
	}
	id := *reqID
	if id == "" {
		id = agent.NewReqID()
	}
	if !f.json {
		fmt.Fprintf(e.stderr, "calling %s on %s (req_id %s)\n", tool, computer, id)
	}
	res, err := c.CallTool(ctx, agent.Call{Computer: computer, Tool: tool, Params: json.RawMessage(*params),
		Timeout: time.Duration(*timeout) * time.Second, ReqID: id})
	if err != nil {
		return err
	}
	if f.json {
		if err := printJSON(e, res); err != nil {
			return err
		}
	} else {
		printResult(e, res)
	}
	if res.IsError {
		return errors.New(resultError(res))
	}
	return nil
}

// findTool finds the Computer of the office that exposes tool.
func findTool(ctx context.Context, c *agent.Client, tool string) (string, error) {
	return findComputer(ctx, c, func(computer string) bool {
		tools, err := c.Tools(ctx, computer)
		return err == nil && slices.ContainsFunc(tools, func(t smcp.SMCPTool) bool { return t.Name == tool })
	}, fmt.Sprintf("no Computer in the office exposes %q (see a2c tools)", tool))
}

// findComputer returns the first Computer of the office for which has
// is true; notFound is the error's text when none is.
func findComputer(ctx context.Context, c *agent.Client, has func(computer string) bool, notFound string) (string, error) {
	names, err := computers(ctx, c, "")
	if err != nil {
		return "", err
	}
	for _, n := range names {
		if has(n) {
			return n, nil
		}
	}
	if len(names) == 0 {
		return "", errors.New("no Computer in the office")
	}
	return "", errors.New(notFound)
}

func printResult(e *env, r *smcp.CallToolResult) {
	for _, raw := range r.Content {
		var item struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			MimeType string `json:"mimeType"`
		}
		_ = json.Unmarshal(raw, &item)
		switch item.Type {
		case "text":
			fmt.Fprintln(e.stdout, item.Text)
		default:
			fmt.Fprintf(e.stdout, "[%s %s]\n", item.Type, item.MimeType)
		}
	}
	if len(r.StructuredContent) > 0 && len(r.Content) == 0 {
		fmt.Fprintln(e.stdout, string(r.StructuredContent))
	}
}

func resultError(r *smcp.CallToolResult) string {
	switch {
	case r.Timeout():
		return "tool call timed out"
	case r.Cancelled():
		return "tool call cancelled"
	case r.ErrorCode() != 0:
		return fmt.Sprintf("tool call failed (%d %s)", r.ErrorCode(), smcp.CodeName(r.ErrorCode()))
	}
	return "tool call failed"
}

func runCancel(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "cancel")
	f := addAgentFlags(fs)
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{"exactly one REQ_ID is required"}
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Cancel(ctx, fs.Arg(0)); err != nil {
		return err
	}
	if f.json {
		return printJSON(e, map[string]any{"cancelled": fs.Arg(0)})
	}
	fmt.Fprintf(e.stdout, "cancel sent for %s\n", fs.Arg(0))
	return nil
}
