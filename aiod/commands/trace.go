package commands

import (
	"context"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2c-smcp/a2c-go/tracing"
)

// A command's span (aiod.command) is a child of the span its Start's
// ctx carries (aiod's MCP tool span, for a tool call): Start makes one
// only under a recording span, with that span's provider, so an untraced
// command costs one context lookup.

// tracerName is the instrumentation scope of the commands' spans.
const tracerName = "github.com/a2c-smcp/a2c-go/aiod/commands"

// Attributes of aiod.command: OpenTelemetry's process conventions for
// the program and the exit code, and aiod's own for the rest. A span
// never carries the command line itself, which may hold a secret (a
// token in an argument, a password in an environment assignment): only
// the program's name and the line's length.
const (
	attrExecutable = attribute.Key("process.executable.name")
	attrLength     = attribute.Key("aiod.command.length")
	attrExitCode   = attribute.Key("process.exit.code")
	attrSession    = attribute.Key("aiod.session")
	attrStatus     = attribute.Key("aiod.command.status")
)

// maxProgram bounds the program name a span carries, in bytes.
const maxProgram = 64

// startSpan starts the span of a command of req in session below parent.
func startSpan(ctx context.Context, parent trace.Span, req Request, session string) trace.Span {
	line := req.Shown
	if line == "" {
		line = req.Command
	}
	_, span := parent.TracerProvider().Tracer(tracerName).Start(ctx, tracing.SpanCommand, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrExecutable.String(program(line)), attrLength.Int(len(line)), attrSession.String(session)))
	return span
}

// program is the name of the program a shell command line runs: the
// last path element of its first word that is not an environment
// assignment (NAME=value), read with the shell's quotes and escapes, cut
// to maxProgram bytes; empty when the line has none.
func program(line string) string {
	for rest := line; ; {
		var w string
		w, rest = shellWord(rest)
		if w == "" && strings.TrimSpace(rest) == "" {
			return ""
		}
		if i := strings.IndexByte(w, '='); i > 0 && isName(w[:i]) {
			continue
		}
		if i := strings.LastIndexByte(w, '/'); i >= 0 && i < len(w)-1 {
			w = w[i+1:]
		}
		return cut(w, maxProgram)
	}
}

// shellWord reads the first word of s as a shell would (blanks apart,
// 'single' and "double" quotes, backslash escapes; nothing expanded) and
// returns it with the rest of s.
func shellWord(s string) (word, rest string) {
	s = strings.TrimLeft(s, " \t\n")
	var b strings.Builder
	var quote byte
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == 0 && (c == ' ' || c == '\t' || c == '\n'):
			return b.String(), s[i:]
		case quote == 0 && (c == '\'' || c == '"'):
			quote = c
		case c == quote:
			quote = 0
		case c == '\\' && quote != '\'' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), ""
}

// isName reports whether s is a shell variable name.
func isName(s string) bool {
	for i, c := range s {
		if c != '_' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return s != ""
}

// endSpanFailed ends the span of a command that could not be started.
// The error's text stays out of the span: it may quote the command.
func endSpanFailed(span trace.Span, _ error) {
	if span == nil {
		return
	}
	tracing.End(span, tracing.OutcomeError, 0, "the command could not start")
}

// endSpan ends the span of a command that ended with status and code;
// killed says a kill ended it. A hard timeout is outcome timeout, a
// kill cancelled, a non-zero exit error: each with the error status.
func endSpan(span trace.Span, status string, code int, killed bool) {
	outcome, msg := tracing.OutcomeOK, ""
	switch {
	case status == StatusTimedOut:
		outcome, msg = tracing.OutcomeTimeout, "killed at its timeout"
	case killed:
		outcome, msg = tracing.OutcomeCancelled, "killed"
	case code != 0:
		outcome, msg = tracing.OutcomeError, "exit code "+strconv.Itoa(code)
	}
	span.SetAttributes(attrExitCode.Int(code), attrStatus.String(status))
	tracing.End(span, outcome, 0, msg)
}

// cut cuts s to at most n bytes, on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
