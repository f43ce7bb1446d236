package desktop

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
	"github.com/a2c-smcp/a2c-go/aiod/internal/serde"
)

// actionTypes are the action types of the contract (spec §2.3), in its
// table's order, which is the order the refusal of another lists them
// in. The worker and aiod's MCP tool (through ActionTypes) check against
// this one list.
var actionTypes = []string{
	"MOVE_TO", "DRAG_TO", "MOVE_REL", "DRAG_REL", "CLICK", "RIGHT_CLICK", "DOUBLE_CLICK", "MOUSE_DOWN", "MOUSE_UP",
	"SCROLL", "TYPING", "PRESS", "KEY_DOWN", "KEY_UP", "HOTKEY", "WAIT", "SET_CLIPBOARD",
	"WINDOW_ACTIVATE", "WINDOW_MINIMIZE", "NODE_FOCUS", "NODE_INVOKE", "NODE_SET_VALUE",
}

// ActionTypes returns the action types POST /v2/computer/actions takes,
// in the contract's order (a copy: aiod's MCP tool builds its schema's
// enum from it and refuses others before they reach the worker).
func ActionTypes() []string { return slices.Clone(actionTypes) }

// InvalidActionType is the refusal of an action_type that is not one of
// [ActionTypes], worded as aiod words it on every surface.
func InvalidActionType(typ string) string {
	return fmt.Sprintf("Invalid action_type: %s. Available types: %s", typ, strings.Join(actionTypes, ", "))
}

// Limits of the action fields.
const (
	maxWait       = 10.0 // seconds, one WAIT
	maxScroll     = 100  // notches, each axis
	maxClicks     = 3
	maxBatch      = 50
	maxBatchWait  = 20.0 // seconds, the WAITs of one batch together
	maxActionText = 1 << 20
	// maxTypedText caps TYPING without the clipboard, key by key at
	// typeDelay (2000 × 8 ms ≈ 16 s), in one action and in a batch
	// together: typing holds the display, and the answer must come well
	// within aiod's one-minute wait for the worker. The clipboard path
	// pastes up to maxActionText at once.
	maxTypedText   = 2000
	maxHotkeyKeys  = 16
	defaultButton  = "left"
	buttonVariants = "left|right|middle"
)

// action is one decoded and validated action: Type plus the fields its
// type uses. Keys are already X keysym names; coordinates are whole
// pixels.
type action struct {
	Type string
	// X, Y: MOVE_TO, DRAG_TO, and CLICK/RIGHT_CLICK/DOUBLE_CLICK when
	// HasXY (else the pointer stays where it is).
	X, Y  int
	HasXY bool
	// DX, DY: MOVE_REL/DRAG_REL offsets in pixels, SCROLL notches (+DY
	// up, +DX right).
	DX, DY    int
	Button    string // left, right, middle
	NumClicks int
	Text      string // TYPING, SET_CLIPBOARD
	// UseClipboard: TYPING pastes Text with Shift+Insert (default).
	UseClipboard bool
	Keys         []string // PRESS/KEY_DOWN/KEY_UP: one keysym; HOTKEY: several
	Duration     float64  // WAIT, seconds
	Window       uint32   // WINDOW_*
	NodeID       string   // NODE_*
}

// screen is the display's size, against which coordinates are checked.
type screen struct{ Width, Height int }

// Action bodies by type, decoded with serde (its 422 wording).
type (
	actionTag struct {
		ActionType string `json:"action_type" serde:"required"`
	}
	pointAction struct {
		X float64 `json:"x" serde:"required"`
		Y float64 `json:"y" serde:"required"`
	}
	offsetAction struct {
		XOffset float64 `json:"x_offset" serde:"required"`
		YOffset float64 `json:"y_offset" serde:"required"`
	}
	clickAction struct {
		X         *float64 `json:"x"`
		Y         *float64 `json:"y"`
		Button    *string  `json:"button" serde:"enum=left|right|middle"`
		NumClicks *uint32  `json:"num_clicks"`
	}
	buttonAction struct {
		Button *string `json:"button" serde:"enum=left|right|middle"`
	}
	scrollAction struct {
		DX *int64 `json:"dx"`
		DY *int64 `json:"dy"`
	}
	typingAction struct {
		Text         string `json:"text" serde:"required"`
		UseClipboard *bool  `json:"use_clipboard"`
	}
	keyAction struct {
		Key string `json:"key" serde:"required"`
	}
	hotkeyAction struct {
		Keys []string `json:"keys" serde:"required"`
	}
	waitAction struct {
		Duration float64 `json:"duration" serde:"required"`
	}
	textAction struct {
		Text string `json:"text" serde:"required"`
	}
	windowAction struct {
		WindowID string `json:"window_id" serde:"required"`
	}
	nodeAction struct {
		NodeID string `json:"node_id" serde:"required"`
	}
	nodeInvokeAction struct {
		NodeID string  `json:"node_id" serde:"required"`
		Action *string `json:"action"`
	}
	nodeSetValueAction struct {
		NodeID string `json:"node_id" serde:"required"`
		Value  string `json:"value" serde:"required"`
	}
)

// fieldError is a 422 about one body field.
func fieldError(loc []string, field, msg string) *serde.Error {
	return &serde.Error{Location: append(append([]string{}, loc...), field), Message: msg, Type: serde.TypeValue}
}

// decodeAction decodes and validates one action body against the screen.
// loc is where the action sits in the request body (["body"] for a single
// action, ["body","actions","3"] in a batch). Its error is a
// *serde.Error (a 422) or, for non-ASCII TYPING without the clipboard,
// an api.ErrInvalid (400).
func decodeAction(body []byte, scr screen, loc []string) (*action, error) {
	var tag actionTag
	if err := decodeAt(body, &tag, loc); err != nil {
		return nil, err
	}
	if !slices.Contains(actionTypes, tag.ActionType) {
		return nil, fieldError(loc, "action_type", InvalidActionType(tag.ActionType))
	}
	a := &action{Type: tag.ActionType, Button: defaultButton, NumClicks: 1}
	var err error
	switch a.Type {
	case "MOVE_TO", "DRAG_TO":
		var p pointAction
		if err = decodeAt(body, &p, loc); err == nil {
			a.X, a.Y, a.HasXY = round(p.X), round(p.Y), true
			err = onScreen(a.X, a.Y, scr, loc)
		}
	case "MOVE_REL", "DRAG_REL":
		var p offsetAction
		if err = decodeAt(body, &p, loc); err == nil {
			a.DX, a.DY = round(p.XOffset), round(p.YOffset)
		}
	case "CLICK", "RIGHT_CLICK", "DOUBLE_CLICK":
		var p clickAction
		if err = decodeAt(body, &p, loc); err != nil {
			break
		}
		switch a.Type {
		case "RIGHT_CLICK":
			a.Button = "right"
		case "DOUBLE_CLICK":
			a.NumClicks = 2
		default:
			if p.Button != nil {
				a.Button = *p.Button
			}
			if p.NumClicks != nil {
				if *p.NumClicks < 1 || *p.NumClicks > maxClicks {
					return nil, fieldError(loc, "num_clicks", fmt.Sprintf("num_clicks must be between 1 and %d", maxClicks))
				}
				a.NumClicks = int(*p.NumClicks)
			}
		}
		if (p.X == nil) != (p.Y == nil) {
			return nil, fieldError(loc, "x", "x and y must be given together")
		}
		if p.X != nil {
			a.X, a.Y, a.HasXY = round(*p.X), round(*p.Y), true
			err = onScreen(a.X, a.Y, scr, loc)
		}
	case "MOUSE_DOWN", "MOUSE_UP":
		var p buttonAction
		if err = decodeAt(body, &p, loc); err == nil && p.Button != nil {
			a.Button = *p.Button
		}
	case "SCROLL":
		var p scrollAction
		if err = decodeAt(body, &p, loc); err != nil {
			break
		}
		if p.DX != nil {
			a.DX = int(max(min(*p.DX, math.MaxInt32), math.MinInt32))
		}
		if p.DY != nil {
			a.DY = int(max(min(*p.DY, math.MaxInt32), math.MinInt32))
		}
		switch {
		case abs(a.DX) > maxScroll:
			err = fieldError(loc, "dx", fmt.Sprintf("dx must be between -%d and %d", maxScroll, maxScroll))
		case abs(a.DY) > maxScroll:
			err = fieldError(loc, "dy", fmt.Sprintf("dy must be between -%d and %d", maxScroll, maxScroll))
		case a.DX == 0 && a.DY == 0:
			err = fieldError(loc, "dy", "dx and dy cannot both be 0")
		}
	case "TYPING":
		var p typingAction
		if err = decodeAt(body, &p, loc); err != nil {
			break
		}
		a.Text, a.UseClipboard = p.Text, p.UseClipboard == nil || *p.UseClipboard
		switch {
		case p.Text == "":
			err = fieldError(loc, "text", "text must not be empty")
		case len(p.Text) > maxActionText:
			err = fieldError(loc, "text", "text is longer than 1 MiB")
		case !a.UseClipboard && !ascii(p.Text):
			err = api.NewError(api.ErrInvalid, "TYPING with use_clipboard false types ASCII text only; use the clipboard for other characters").
				WithHint("set use_clipboard to true").WithField("text")
		case !a.UseClipboard && len(p.Text) > maxTypedText:
			err = fieldError(loc, "text", fmt.Sprintf("TYPING with use_clipboard false types at most %d characters (key by key, about 16 s); paste longer text with use_clipboard true (up to 1 MiB)", maxTypedText))
		}
	case "PRESS", "KEY_DOWN", "KEY_UP":
		var p keyAction
		if err = decodeAt(body, &p, loc); err != nil {
			break
		}
		s, ok := keysym(p.Key)
		if !ok {
			return nil, fieldError(loc, "key", fmt.Sprintf("unknown key %q", p.Key))
		}
		a.Keys = []string{s}
	case "HOTKEY":
		var p hotkeyAction
		if err = decodeAt(body, &p, loc); err != nil {
			break
		}
		if len(p.Keys) == 0 || len(p.Keys) > maxHotkeyKeys {
			return nil, fieldError(loc, "keys", fmt.Sprintf("keys must hold 1 to %d key names", maxHotkeyKeys))
		}
		syms, bad, ok := hotkeySyms(p.Keys)
		if !ok {
			return nil, fieldError(append(append([]string{}, loc...), "keys"), strconv.Itoa(bad), fmt.Sprintf("unknown key %q", p.Keys[bad]))
		}
		a.Keys = syms
	case "WAIT":
		var p waitAction
		if err = decodeAt(body, &p, loc); err == nil {
			if !(p.Duration > 0 && p.Duration <= maxWait) {
				return nil, fieldError(loc, "duration", fmt.Sprintf("duration must be greater than 0 and at most %g seconds", maxWait))
			}
			a.Duration = p.Duration
		}
	case "SET_CLIPBOARD":
		var p textAction
		if err = decodeAt(body, &p, loc); err == nil {
			a.Text = p.Text
			if len(p.Text) > maxActionText {
				err = fieldError(loc, "text", "text is longer than 1 MiB")
			}
		}
	case "WINDOW_ACTIVATE", "WINDOW_MINIMIZE":
		var p windowAction
		if err = decodeAt(body, &p, loc); err == nil {
			id, ok := parseWindowID(p.WindowID)
			if !ok {
				return nil, fieldError(loc, "window_id", fmt.Sprintf("window_id %q is not a window handle (decimal or 0x hex)", p.WindowID))
			}
			a.Window = id
		}
	case "NODE_FOCUS":
		var p nodeAction
		if err = decodeAt(body, &p, loc); err == nil {
			a.NodeID = p.NodeID
		}
	case "NODE_INVOKE":
		var p nodeInvokeAction
		if err = decodeAt(body, &p, loc); err == nil {
			a.NodeID = p.NodeID
		}
	case "NODE_SET_VALUE":
		var p nodeSetValueAction
		if err = decodeAt(body, &p, loc); err == nil {
			a.NodeID = p.NodeID
		}
	}
	if err != nil {
		return nil, err
	}
	return a, nil
}

// decodeAt decodes body into v with serde's rules, the error's location
// moved under loc.
func decodeAt(body []byte, v any, loc []string) error {
	if err := serde.DecodeInto(body, v); err != nil {
		if len(loc) > 1 {
			err.Location = append(append([]string{}, loc...), err.Location[1:]...)
		}
		return err
	}
	return nil
}

// batchRequest is POST actions/batch after decoding: the actions,
// validated together before any runs.
type batchRequest struct {
	Actions           []*action
	IncludeScreenshot bool
}

type batchBody struct {
	Actions           json.RawMessage `json:"actions" serde:"required"`
	IncludeScreenshot *bool           `json:"include_screenshot"`
}

// decodeBatch decodes and validates a batch: at most maxBatch actions,
// their WAITs together at most maxBatchWait seconds, every action valid
// (see decodeAction). A batch over a limit is a 422 like a bad field.
func decodeBatch(body []byte, scr screen) (*batchRequest, error) {
	var b batchBody
	if err := serde.DecodeInto(body, &b); err != nil {
		return nil, err
	}
	var items []json.RawMessage
	if err := json.Unmarshal(b.Actions, &items); err != nil {
		return nil, &serde.Error{Location: []string{"body", "actions"}, Message: "invalid type: expected a sequence of actions", Type: serde.TypeType}
	}
	loc := []string{"body"}
	if len(items) > maxBatch {
		return nil, fieldError(loc, "actions", fmt.Sprintf("a batch holds at most %d actions, got %d", maxBatch, len(items)))
	}
	req := &batchRequest{IncludeScreenshot: b.IncludeScreenshot != nil && *b.IncludeScreenshot}
	// the WAITs are summed in whole microseconds: float sums drift (25
	// × 0.8 s added up to 20.000000000000007)
	var waitUS int64
	typed := 0
	for i, it := range items {
		a, err := decodeAction(it, scr, []string{"body", "actions", strconv.Itoa(i)})
		if err != nil {
			return nil, err
		}
		waitUS += int64(math.Round(a.Duration * 1e6))
		if a.Type == "TYPING" && !a.UseClipboard {
			typed += len(a.Text)
		}
		req.Actions = append(req.Actions, a)
	}
	if typed > maxTypedText {
		return nil, fieldError(loc, "actions", fmt.Sprintf("the TYPING actions of a batch with use_clipboard false type at most %d characters together, got %d; paste longer text with use_clipboard true", maxTypedText, typed))
	}
	if waitUS > maxBatchWait*1e6 {
		return nil, fieldError(loc, "actions", fmt.Sprintf("the WAIT actions of a batch last at most %g seconds together, got %g", maxBatchWait, float64(waitUS)/1e6))
	}
	return req, nil
}

// onScreen refuses a point outside the screen (1.x did too).
func onScreen(x, y int, scr screen, loc []string) error {
	if scr.Width <= 0 || scr.Height <= 0 {
		return nil // no display to check against: the action answers 503
	}
	if x < 0 || x >= scr.Width {
		return fieldError(loc, "x", fmt.Sprintf("x %d is off the screen (0 to %d)", x, scr.Width-1))
	}
	if y < 0 || y >= scr.Height {
		return fieldError(loc, "y", fmt.Sprintf("y %d is off the screen (0 to %d)", y, scr.Height-1))
	}
	return nil
}

// parseWindowID reads a window handle as GET windows prints it (decimal)
// or as xdotool and xwininfo do (0x hex).
func parseWindowID(s string) (uint32, bool) {
	base := 10
	if h, ok := strings.CutPrefix(strings.ToLower(s), "0x"); ok {
		s, base = h, 16
	}
	v, err := strconv.ParseUint(s, base, 32)
	return uint32(v), err == nil && v != 0
}

func round(f float64) int {
	return int(max(min(math.Round(f), math.MaxInt32), math.MinInt32))
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
