package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/server"
	"github.com/a2c-smcp/a2c-go/smcp"
	"github.com/a2c-smcp/a2c-go/tracing"
)

// agentFlags are the flags every agent-side command shares.
type agentFlags struct {
	server, office, name, token, authField, version string
	json                                            bool
	// tracer, when set, traces the Agent's tool calls (a2c call).
	tracer trace.TracerProvider
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
	o := agent.Options{Name: name, ProtocolVersion: f.version, TracerProvider: f.tracer}
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
	enc.SetEscapeHTML(false) // a message's '<plugin>' stays as it is
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
	withTrace := fs.Bool("trace", false, `after the result, print the call's trace: its spans on every hop, as a timeline on stderr (with --json, as "trace" in the result)`)
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
	// The call's span: exported when OTEL_* asks (as every a2c process
	// does), kept here for --trace.
	var rec *tracing.Recorder
	if *withTrace {
		rec = tracing.NewRecorder(4, 0)
	}
	tr, stopTracing, err := startTracing(ctx, "a2c-agent", false, rec, slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return err
	}
	defer stopTracing()
	f.tracer = tr.Provider
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
	var spans []tracing.Span
	if *withTrace {
		var note string
		spans, note = f.callTrace(ctx, rec, tracing.TraceID(c.Name(), id))
		if !f.json {
			defer func() { // after the result, or the error
				if note != "" {
					fmt.Fprintf(e.stderr, "a2c call: %s\n", note)
				}
				printTimeline(e.stderr, spans)
			}()
		}
	}
	if err != nil {
		return err
	}
	switch {
	case f.json && *withTrace:
		if err := printTraced(e, res, spans); err != nil {
			return err
		}
	case f.json:
		if err := printJSON(e, res); err != nil {
			return err
		}
	default:
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

// traceSettle bounds how long a2c call --trace waits for the hub to
// hold the Computer's span: in one process (a2c up) it is recorded as the
// answer leaves, a moment after the hub's own spans.
const traceSettle = 300 * time.Millisecond

// callTrace returns the spans of trace id: this process's (the Agent's
// span) merged by span id with those the hub serves at
// GET /api/traces/{trace_id}. note says why the hub's are missing, when
// they are.
func (f *agentFlags) callTrace(ctx context.Context, rec *tracing.Recorder, id trace.TraceID) (spans []tracing.Span, note string) {
	local, _ := rec.Trace(id)
	deadline := time.Now().Add(traceSettle)
	for {
		remote, note := f.hubTrace(ctx, id)
		if note != "" {
			return local, note
		}
		spans = mergeSpans(local, remote)
		if time.Now().After(deadline) || slices.ContainsFunc(spans, func(s tracing.Span) bool { return s.Name == tracing.SpanComputerCall }) {
			return spans, ""
		}
		select {
		case <-ctx.Done():
			return spans, ""
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// hubTrace fetches the hub's spans of trace id, with the credential the
// connection presented; note is set when there are none to have.
func (f *agentFlags) hubTrace(ctx context.Context, id trace.TraceID) (spans []tracing.Span, note string) {
	const local = "showing this process's spans only"
	endpoint := strings.TrimSuffix(f.server, "/") + "/api/traces/" + id.String()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return nil, fmt.Sprintf("the hub's spans: %v; %s", err, local)
	}
	if t := f.credential(); t != "" {
		req.Header.Set(f.authField, t)
		if !strings.EqualFold(f.authField, "authorization") {
			req.Header.Set("Authorization", "Bearer "+t)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Sprintf("the hub's spans: %v; %s", err, local)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return nil, "the hub keeps no spans of this call (GET /api/traces: 404); " + local
	default:
		return nil, fmt.Sprintf("the hub's spans: GET /api/traces answered %s; %s", resp.Status, local)
	}
	var info server.TraceInfo
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&info); err != nil {
		return nil, fmt.Sprintf("the hub's spans: undecodable answer: %v; %s", err, local)
	}
	return info.Spans, ""
}

// mergeSpans is a and those of b whose span id a lacks, by start time.
func mergeSpans(a, b []tracing.Span) []tracing.Span {
	out := slices.Clone(a)
	seen := make(map[string]bool, len(a)+len(b))
	for _, s := range a {
		seen[s.SpanID] = true
	}
	for _, s := range b {
		if !seen[s.SpanID] {
			seen[s.SpanID] = true
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, tracing.ByStart)
	return out
}

// printTraced prints a result as --json does, with "trace" added: the
// call's spans (tracing.Span: name, span_id, parent_id, start,
// duration_ms and more).
func printTraced(e *env, res *smcp.CallToolResult, spans []tracing.Span) error {
	if spans == nil {
		spans = []tracing.Span{}
	}
	obj, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	tr, err := json.Marshal(spans)
	if err != nil {
		return fmt.Errorf("encode trace: %w", err)
	}
	// The result's own fields, in their order, then "trace".
	var b bytes.Buffer
	b.Write(obj[:len(obj)-1])
	if len(obj) > 2 {
		b.WriteByte(',')
	}
	b.WriteString(`"trace":`)
	b.Write(tr)
	b.WriteByte('}')
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", "  "); err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	out.WriteByte('\n')
	_, err = e.stdout.Write(out.Bytes())
	return err
}

// timelineBar is the width of a timeline's bars.
const timelineBar = 32

// printTimeline prints spans as a timeline: one line per span, under its
// parent (a span whose parent is missing is at the top level), with its
// start from the trace's start and its duration in milliseconds, a bar,
// its name, service and status.
func printTimeline(w io.Writer, spans []tracing.Span) {
	if len(spans) == 0 {
		fmt.Fprintln(w, "trace: no spans")
		return
	}
	type line struct {
		s     tracing.Span
		depth int
	}
	byID := make(map[string]bool, len(spans))
	for _, s := range spans {
		byID[s.SpanID] = true
	}
	children := make(map[string][]tracing.Span)
	var roots []tracing.Span
	for _, s := range spans {
		if s.ParentID == "" || !byID[s.ParentID] || s.ParentID == s.SpanID {
			roots = append(roots, s)
		} else {
			children[s.ParentID] = append(children[s.ParentID], s)
		}
	}
	byStart := tracing.ByStart
	slices.SortStableFunc(roots, byStart)
	var lines []line
	done := make(map[string]bool, len(spans))
	var walk func(s tracing.Span, depth int)
	walk = func(s tracing.Span, depth int) {
		if done[s.SpanID] {
			return
		}
		done[s.SpanID] = true
		lines = append(lines, line{s, depth})
		kids := children[s.SpanID]
		slices.SortStableFunc(kids, byStart)
		for _, k := range kids {
			walk(k, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	for _, s := range spans { // a cycle of parents: shown at the top level
		if !done[s.SpanID] {
			walk(s, 0)
		}
	}

	t0, t1 := spans[0].Start, spans[0].Start
	for _, s := range spans {
		if s.Start.Before(t0) {
			t0 = s.Start
		}
		if end := s.Start.Add(time.Duration(s.DurationMS * float64(time.Millisecond))); end.After(t1) {
			t1 = end
		}
	}
	total := float64(t1.Sub(t0)) / float64(time.Millisecond)
	fmt.Fprintf(w, "trace %s: %d spans, %.3f ms\n", spans[0].TraceID, len(spans), total)

	type cells struct{ off, dur, name, service, status, bar string }
	rows := make([]cells, len(lines))
	var wOff, wDur, wName, wSvc int
	for i, l := range lines {
		off := float64(l.s.Start.Sub(t0)) / float64(time.Millisecond)
		c := cells{
			off:     fmt.Sprintf("+%.3f ms", off),
			dur:     fmt.Sprintf("%.3f ms", l.s.DurationMS),
			name:    strings.Repeat("  ", l.depth) + l.s.Name,
			service: l.s.Service,
			status:  l.s.Status,
			bar:     timelineBarOf(off, l.s.DurationMS, total),
		}
		if c.service == "" {
			c.service = "-"
		}
		switch msg := firstLine(l.s.StatusMessage, 80); {
		case msg == "":
		case msg == c.status || strings.HasPrefix(msg, c.status+" "):
			c.status = msg // "error (error_code 4404)", not "error: error (...)"
		default:
			c.status += ": " + msg // "error: timeout", "error: Computer not found (error_code 404)"
		}
		rows[i] = c
		wOff, wDur = max(wOff, len(c.off)), max(wDur, len(c.dur))
		wName, wSvc = max(wName, len([]rune(c.name))), max(wSvc, len([]rune(c.service)))
	}
	for _, c := range rows {
		fmt.Fprintf(w, "  %*s  %*s  |%s|  %-*s  %-*s  %s\n", wOff, c.off, wDur, c.dur, c.bar, wName, c.name, wSvc, c.service, c.status)
	}
}

// timelineBarOf draws a span from off to off+dur of a trace total
// milliseconds long, at least one cell wide.
func timelineBarOf(off, dur, total float64) string {
	from, n := 0, timelineBar
	if total > 0 {
		from = min(int(off/total*timelineBar), timelineBar-1)
		n = max(1, min(int(dur/total*timelineBar+0.5), timelineBar-from))
	}
	return strings.Repeat(" ", from) + strings.Repeat("█", n) + strings.Repeat(" ", timelineBar-from-n)
}
