package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/code"
	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

type codeArgs struct {
	Code     *string  `json:"code"`
	Language *string  `json:"language"`
	Timeout  *float64 `json:"timeout"`
}

// executeCode is sandbox_execute_code over the code engine (a one-off
// run, as POST /v2/code/execute without a session). The text is what the
// run printed and returned, in order: streams as written, a value's
// text/plain, an error's name, value and traceback (without terminal
// colours); images come as image content. isError unless the run's
// status is ok.
func (s *Server) executeCode(ctx context.Context, args []byte) result {
	var a codeArgs
	if msg := decodeArgs(args, &a); msg != "" {
		return failure(msg)
	}
	if a.Code == nil {
		return failure("code is required")
	}
	lang := code.Python
	if a.Language != nil && *a.Language != "" {
		l, ok := code.ParseLanguage(*a.Language)
		if !ok {
			return failure(code.UnsupportedLanguage(*a.Language))
		}
		lang = l
	}
	var timeout time.Duration
	if a.Timeout != nil {
		if *a.Timeout < 1 || *a.Timeout > 900 {
			return failure("timeout must be between 1 and 900 seconds")
		}
		timeout = time.Duration(*a.Timeout * float64(time.Second))
	}
	if s.cfg.Code == nil {
		return failure("code execution is not available on this daemon")
	}
	res, err := s.cfg.Code.Execute(ctx, code.Request{Language: lang, Code: *a.Code, Timeout: timeout})
	if err != nil {
		msg, _ := api.MessageOf(err)
		return failure(msg)
	}
	var text strings.Builder
	var images []content
	for _, o := range res.Outputs {
		switch o.OutputType {
		case code.OutputStream:
			text.WriteString(o.Text)
		case code.OutputError:
			fmt.Fprintf(&text, "%s: %s\n", o.Ename, o.Evalue)
			for _, l := range o.Traceback {
				text.WriteString(ansi.ReplaceAllString(l, "") + "\n")
			}
		default: // execute_result, display_data
			if img, mt := bundleImage(o.Data); img != "" {
				images = append(images, content{Type: "image", Data: img, MimeType: mt})
			} else if t := bundleText(o.Data); t != "" {
				text.WriteString(t + "\n")
			}
		}
	}
	r := textResult(text.String())
	r.Content = append(r.Content, images...)
	r.IsError = res.Status != code.StatusOK
	return r
}

// ansi matches terminal colour sequences (IPython colours tracebacks).
var ansi = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)

// bundleText is a mime bundle's text/plain (a string, or a list of lines).
func bundleText(data map[string]json.RawMessage) string {
	raw, ok := data["text/plain"]
	if !ok {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var lines []string
	if json.Unmarshal(raw, &lines) == nil {
		return strings.Join(lines, "")
	}
	return ""
}

// bundleImage is a mime bundle's PNG or JPEG (base64) and its type.
func bundleImage(data map[string]json.RawMessage) (string, string) {
	for _, mt := range []string{"image/png", "image/jpeg"} {
		var b64 string
		if raw, ok := data[mt]; ok && json.Unmarshal(raw, &b64) == nil && b64 != "" {
			return strings.ReplaceAll(b64, "\n", ""), mt
		}
	}
	return "", ""
}

// getContext is sandbox_get_context: the daemon's own description of the
// sandbox (what GET /v2/sandbox reports), as JSON.
func (s *Server) getContext(ctx context.Context, _ []byte) result {
	if s.cfg.Context == nil {
		return failure("the sandbox context is not available on this daemon")
	}
	v, err := s.cfg.Context(ctx)
	if err != nil {
		return failure(err.Error())
	}
	return jsonResult(v, false)
}

// getPackages is sandbox_get_packages: GET /v2/sandbox/packages's text.
func (s *Server) getPackages(ctx context.Context, args []byte) result {
	var a struct {
		Language *string `json:"language"`
	}
	if msg := decodeArgs(args, &a); msg != "" {
		return failure(msg)
	}
	lang := "python"
	if a.Language != nil && *a.Language != "" {
		lang = *a.Language
	}
	if s.cfg.Packages == nil {
		return failure("package listing is not available on this daemon")
	}
	text, err := s.cfg.Packages(ctx, lang)
	if err != nil {
		return failure(err.Error())
	}
	return textResult(text)
}
