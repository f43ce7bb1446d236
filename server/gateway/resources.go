package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// readWindow reads a desktop window of computer: client:get_desktop for
// that window's URI, its text after the URI line.
func (o *office) readWindow(computer string) func(ctx context.Context, uri string) (*sdk.ReadResourceResult, error) {
	return func(ctx context.Context, uri string) (*sdk.ReadResourceResult, error) {
		var ret smcp.GetDesktopRet
		if err := o.ask(ctx, smcp.EventGetDesktop, smcp.GetDesktopReq{Computer: computer, Window: &uri}, &ret); err != nil {
			return nil, err
		}
		for _, d := range ret.Desktops {
			if u, text, _ := strings.Cut(d, "\n\n"); u == uri {
				return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: text}}}, nil
			}
		}
		return nil, sdk.ResourceNotFoundError(uri)
	}
}

// readSkill reads a skill's SKILL.md through client:get_skill.
func (o *office) readSkill(computer, name string) func(ctx context.Context, uri string) (*sdk.ReadResourceResult, error) {
	return func(ctx context.Context, uri string) (*sdk.ReadResourceResult, error) {
		var ret smcp.GetSkillRet
		if err := o.ask(ctx, smcp.EventGetSkill, smcp.GetSkillReq{Computer: computer, Name: name}, &ret); err != nil {
			return nil, err
		}
		if ret.Body == nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
				Message: "the skill file is served as a blob (too large or binary), which the gateway does not read; use an A2C Agent's client:get_blob"}
		}
		mime := ret.MimeType
		if mime == "" {
			mime = "text/markdown"
		}
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: mime, Text: *ret.Body}}}, nil
	}
}

// ask makes one request of the office's Computer for a resource read: a
// refusal or a Computer's error is a JSON-RPC error with its message.
func (o *office) ask(ctx context.Context, event string, payload, out any) error {
	ctx, cancel := context.WithTimeout(ctx, o.g.cfg.ListTimeout)
	defer cancel()
	raw, err := o.g.hub.Request(ctx, o.id, o.g.caller, event, payload)
	var pe *smcp.Error
	switch {
	case errors.As(err, &pe):
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: pe.Message}
	case err != nil:
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the Computer did not answer"}
	}
	if json.Unmarshal(raw, out) != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the Computer's answer could not be read"}
	}
	return nil
}
