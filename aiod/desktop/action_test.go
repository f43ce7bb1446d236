package desktop

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
	"github.com/a2c-smcp/a2c-go/aiod/internal/serde"
)

var testScreen = screen{Width: 1280, Height: 800}

func TestDecodeAction(t *testing.T) {
	for _, tc := range []struct {
		body string
		want action
	}{
		{`{"action_type":"MOVE_TO","x":100,"y":200.4}`, action{Type: "MOVE_TO", X: 100, Y: 200, HasXY: true}},
		{`{"action_type":"DRAG_TO","x":1279,"y":799}`, action{Type: "DRAG_TO", X: 1279, Y: 799, HasXY: true}},
		{`{"action_type":"MOVE_REL","x_offset":-5,"y_offset":7.6}`, action{Type: "MOVE_REL", DX: -5, DY: 8}},
		{`{"action_type":"DRAG_REL","x_offset":1,"y_offset":0}`, action{Type: "DRAG_REL", DX: 1}},
		{`{"action_type":"CLICK"}`, action{Type: "CLICK", Button: "left", NumClicks: 1}},
		{`{"action_type":"CLICK","x":1,"y":2,"button":"middle","num_clicks":3}`, action{Type: "CLICK", X: 1, Y: 2, HasXY: true, Button: "middle", NumClicks: 3}},
		{`{"action_type":"CLICK","x":null,"y":null}`, action{Type: "CLICK", Button: "left", NumClicks: 1}},
		{`{"action_type":"RIGHT_CLICK","x":3,"y":4}`, action{Type: "RIGHT_CLICK", X: 3, Y: 4, HasXY: true, Button: "right", NumClicks: 1}},
		{`{"action_type":"DOUBLE_CLICK"}`, action{Type: "DOUBLE_CLICK", Button: "left", NumClicks: 2}},
		{`{"action_type":"MOUSE_DOWN"}`, action{Type: "MOUSE_DOWN", Button: "left", NumClicks: 1}},
		{`{"action_type":"MOUSE_UP","button":"right"}`, action{Type: "MOUSE_UP", Button: "right", NumClicks: 1}},
		{`{"action_type":"SCROLL","dy":-100}`, action{Type: "SCROLL", DY: -100}},
		{`{"action_type":"SCROLL","dx":3,"dy":0}`, action{Type: "SCROLL", DX: 3}},
		{`{"action_type":"TYPING","text":"héllo"}`, action{Type: "TYPING", Text: "héllo", UseClipboard: true}},
		{`{"action_type":"TYPING","text":"hi\n","use_clipboard":false}`, action{Type: "TYPING", Text: "hi\n"}},
		{`{"action_type":"PRESS","key":"Enter"}`, action{Type: "PRESS", Keys: []string{"Return"}}},
		{`{"action_type":"KEY_DOWN","key":"shift"}`, action{Type: "KEY_DOWN", Keys: []string{"Shift_L"}}},
		{`{"action_type":"KEY_UP","key":"A"}`, action{Type: "KEY_UP", Keys: []string{"A"}}},
		{`{"action_type":"HOTKEY","keys":["ctrl","shift","t"]}`, action{Type: "HOTKEY", Keys: []string{"Control_L", "Shift_L", "t"}}},
		{`{"action_type":"HOTKEY","keys":["hyper","plus"]}`, action{Type: "HOTKEY", Keys: []string{"Control_L", "Alt_L", "Shift_L", "plus"}}},
		{`{"action_type":"WAIT","duration":10}`, action{Type: "WAIT", Duration: 10}},
		{`{"action_type":"SET_CLIPBOARD","text":""}`, action{Type: "SET_CLIPBOARD"}},
		{`{"action_type":"WINDOW_ACTIVATE","window_id":"0x400007"}`, action{Type: "WINDOW_ACTIVATE", Window: 0x400007}},
		{`{"action_type":"WINDOW_MINIMIZE","window_id":"4194311"}`, action{Type: "WINDOW_MINIMIZE", Window: 4194311}},
		{`{"action_type":"NODE_FOCUS","node_id":"a::1.2:/x"}`, action{Type: "NODE_FOCUS", NodeID: "a::1.2:/x"}},
		{`{"action_type":"NODE_INVOKE","node_id":"u:1","action":"press"}`, action{Type: "NODE_INVOKE", NodeID: "u:1"}},
		{`{"action_type":"NODE_SET_VALUE","node_id":"u:1","value":"x"}`, action{Type: "NODE_SET_VALUE", NodeID: "u:1"}},
	} {
		got, err := decodeAction([]byte(tc.body), testScreen, []string{"body"})
		if err != nil {
			t.Errorf("%s: %v", tc.body, err)
			continue
		}
		want := tc.want
		if want.Button == "" {
			want.Button = "left"
		}
		if want.NumClicks == 0 {
			want.NumClicks = 1
		}
		if !reflect.DeepEqual(*got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.body, *got, want)
		}
	}
}

func TestDecodeActionRefusals(t *testing.T) {
	for _, tc := range []struct {
		body    string
		loc     string // the 422's location; "" for a 400
		message string // a part of the message
	}{
		{`{}`, "body.action_type", "missing field `action_type`"},
		{`[]`, "body", ""},
		{`{"action_type":"FLY"}`, "body.action_type", "Invalid action_type: FLY. Available types: MOVE_TO, DRAG_TO, MOVE_REL, DRAG_REL, CLICK,"},
		{`{"action_type":7}`, "body.action_type", "invalid type"},
		{`{"action_type":"MOVE_TO","x":1}`, "body.y", "missing field `y`"},
		{`{"action_type":"MOVE_TO","x":"1","y":2}`, "body.x", "invalid type"},
		{`{"action_type":"MOVE_TO","x":-1,"y":2}`, "body.x", "off the screen"},
		{`{"action_type":"MOVE_TO","x":1280,"y":2}`, "body.x", "off the screen"},
		{`{"action_type":"DRAG_TO","x":0,"y":800}`, "body.y", "off the screen"},
		{`{"action_type":"CLICK","x":5000,"y":1}`, "body.x", "off the screen"},
		{`{"action_type":"CLICK","x":5}`, "body.x", "together"},
		{`{"action_type":"CLICK","num_clicks":0}`, "body.num_clicks", "between 1 and 3"},
		{`{"action_type":"CLICK","num_clicks":4}`, "body.num_clicks", "between 1 and 3"},
		{`{"action_type":"CLICK","button":"side"}`, "body.button", "unknown variant `side`"},
		{`{"action_type":"MOUSE_DOWN","button":"x"}`, "body.button", "unknown variant"},
		{`{"action_type":"SCROLL"}`, "body.dy", "both be 0"},
		{`{"action_type":"SCROLL","dy":101}`, "body.dy", "between -100 and 100"},
		{`{"action_type":"SCROLL","dx":-101}`, "body.dx", "between -100 and 100"},
		{`{"action_type":"SCROLL","dy":1.5}`, "body.dy", "invalid type"},
		{`{"action_type":"TYPING"}`, "body.text", "missing field `text`"},
		{`{"action_type":"TYPING","text":""}`, "body.text", "not be empty"},
		{`{"action_type":"TYPING","text":"é","use_clipboard":false}`, "", "ASCII"},
		{`{"action_type":"TYPING","text":"` + strings.Repeat("a", 2001) + `","use_clipboard":false}`, "body.text", "types at most 2000 characters"},
		{`{"action_type":"TYPING","text":"` + strings.Repeat("a", 1<<20+1) + `"}`, "body.text", "longer than 1 MiB"},
		{`{"action_type":"PRESS","key":"notakey"}`, "body.key", `unknown key "notakey"`},
		{`{"action_type":"PRESS","key":"hyper"}`, "body.key", `unknown key "hyper"`},
		{`{"action_type":"PRESS","key":"fn"}`, "body.key", "unknown key"},
		{`{"action_type":"PRESS","key":""}`, "body.key", "unknown key"},
		{`{"action_type":"PRESS"}`, "body.key", "missing field `key`"},
		{`{"action_type":"KEY_DOWN","key":"é"}`, "body.key", "unknown key"},
		{`{"action_type":"HOTKEY","keys":[]}`, "body.keys", "1 to 16"},
		{`{"action_type":"HOTKEY","keys":["ctrl","nope"]}`, "body.keys.1", `unknown key "nope"`},
		{`{"action_type":"HOTKEY","keys":"ctrl"}`, "body.keys", "invalid type"},
		{`{"action_type":"WAIT","duration":0}`, "body.duration", "greater than 0"},
		{`{"action_type":"WAIT","duration":11}`, "body.duration", "at most 10"},
		{`{"action_type":"WAIT","duration":-1}`, "body.duration", "greater than 0"},
		{`{"action_type":"SET_CLIPBOARD"}`, "body.text", "missing field `text`"},
		{`{"action_type":"WINDOW_ACTIVATE"}`, "body.window_id", "missing field `window_id`"},
		{`{"action_type":"WINDOW_ACTIVATE","window_id":"abc"}`, "body.window_id", "not a window handle"},
		{`{"action_type":"WINDOW_MINIMIZE","window_id":"0"}`, "body.window_id", "not a window handle"},
		{`{"action_type":"NODE_FOCUS"}`, "body.node_id", "missing field `node_id`"},
		{`{"action_type":"NODE_SET_VALUE","node_id":"x"}`, "body.value", "missing field `value`"},
	} {
		_, err := decodeAction([]byte(tc.body), testScreen, []string{"body"})
		var se *serde.Error
		switch {
		case err == nil:
			t.Errorf("%s: accepted", tc.body)
		case tc.loc == "":
			var ae *api.Error
			if !errors.As(err, &ae) || api.Status(err) != 400 || !strings.Contains(ae.Message, tc.message) {
				t.Errorf("%s: %v, want a 400 with %q", tc.body, err, tc.message)
			}
		case !errors.As(err, &se):
			t.Errorf("%s: %v (%T), want a 422", tc.body, err, err)
		case strings.Join(se.Location, ".") != tc.loc || !strings.Contains(se.Message, tc.message):
			t.Errorf("%s: %v %q, want %s %q", tc.body, se.Location, se.Message, tc.loc, tc.message)
		}
	}
}

func TestDecodeBatch(t *testing.T) {
	wait := func(d float64) string { return fmt.Sprintf(`{"action_type":"WAIT","duration":%g}`, d) }
	many := func(n int, item string) string {
		return `{"actions":[` + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + `]}`
	}
	for _, tc := range []struct {
		body, loc, message string
	}{
		{many(50, wait(0.1)), "", ""},
		{many(2, wait(10)), "", ""},
		{`{"actions":[],"include_screenshot":true}`, "", ""},
		{many(51, wait(0.1)), "body.actions", "at most 50 actions, got 51"},
		{many(3, wait(7)), "body.actions", "at most 20 seconds together, got 21"},
		{many(25, wait(0.8)), "", ""},
		{many(50, wait(0.4)), "", ""},
		{`{"actions":[` + wait(10) + `,` + wait(10) + `,` + wait(0.000001) + `]}`, "body.actions", "got 20.000001"},
		{`{}`, "body.actions", "missing field `actions`"},
		{`{"actions":{}}`, "body.actions", "sequence"},
		{`{"actions":[` + wait(1) + `,{"action_type":"PRESS","key":"nope"}]}`, "body.actions.1.key", "unknown key"},
		{`{"actions":[{"x":1}]}`, "body.actions.0.action_type", "missing field"},
		{many(2, `{"action_type":"TYPING","text":"`+strings.Repeat("a", 1000)+`","use_clipboard":false}`), "", ""},
		{many(3, `{"action_type":"TYPING","text":"`+strings.Repeat("a", 1000)+`","use_clipboard":false}`), "body.actions", "at most 2000 characters together, got 3000"},
		{many(3, `{"action_type":"TYPING","text":"`+strings.Repeat("a", 1000)+`"}`), "", ""},
	} {
		b, err := decodeBatch([]byte(tc.body), testScreen)
		var se *serde.Error
		switch {
		case tc.loc == "" && err != nil:
			t.Errorf("%.60s: %v", tc.body, err)
		case tc.loc == "":
			if strings.Contains(tc.body, "include_screenshot") != b.IncludeScreenshot {
				t.Errorf("%.60s: include_screenshot %v", tc.body, b.IncludeScreenshot)
			}
		case !errors.As(err, &se):
			t.Errorf("%.60s: %v, want a 422", tc.body, err)
		case strings.Join(se.Location, ".") != tc.loc || !strings.Contains(se.Message, tc.message):
			t.Errorf("%.60s: %v %q, want %s %q", tc.body, se.Location, se.Message, tc.loc, tc.message)
		}
	}
}

func TestKeysym(t *testing.T) {
	for _, tc := range []struct {
		name, want string
	}{
		{"a", "a"}, {"Z", "Z"}, {"7", "7"}, {"enter", "Return"}, {"ENTER", "Return"}, {"return", "Return"},
		{"\n", "Return"}, {"\t", "Tab"}, {" ", "space"}, {"esc", "Escape"}, {"pgup", "Prior"}, {"pgdn", "Next"},
		{"win", "Super_L"}, {"super", "Super_L"}, {"control", "Control_L"}, {"meta", "Alt_L"}, {"altgr", "Alt_R"},
		{"arrowleft", "Left"}, {"ArrowDown", "Down"}, {"minus", "minus"}, {"plus", "plus"}, {"-", "minus"},
		{"+", "plus"}, {"mute", "XF86AudioMute"}, {"volumeup", "XF86AudioRaiseVolume"}, {"f1", "F1"}, {"F24", "F24"},
		{"num0", "KP_0"}, {"num9", "KP_9"}, {"backspace", "BackSpace"}, {"del", "Delete"}, {"~", "asciitilde"},
		{"\\", "backslash"}, {"'", "apostrophe"}, {"prtsc", "Print"}, {"capslock", "Caps_Lock"}, {"apps", "Menu"},
	} {
		if got, ok := keysym(tc.name); !ok || got != tc.want {
			t.Errorf("keysym(%q) = %q %v, want %q", tc.name, got, ok, tc.want)
		}
	}
	for _, bad := range []string{"", "notakey", "hyper", "f25", "num10", "accept", "fn", "final", "é", "ctrl+c", "Return ", "\x00", "aa"} {
		if got, ok := keysym(bad); ok {
			t.Errorf("keysym(%q) = %q, want unknown", bad, got)
		}
	}
	// every table entry is a keysym name xdotool reads (no spaces, no '+')
	for n, s := range namedKeys {
		if s == "" || strings.ContainsAny(s, " +") {
			t.Errorf("%s → %q", n, s)
		}
	}
}

// FuzzDecodeAction: any body decodes to a valid action or a refusal of a
// documented kind, never a panic; an accepted action is within limits.
func FuzzDecodeAction(f *testing.F) {
	for _, s := range []string{`{"action_type":"MOVE_TO","x":1,"y":2}`, `{"action_type":"HOTKEY","keys":["hyper","a"]}`,
		`{"action_type":"SCROLL","dx":-3}`, `{"action_type":"TYPING","text":"é","use_clipboard":false}`, `{"action_type":"WAIT","duration":1e308}`,
		`{"action_type":"CLICK","num_clicks":4294967295}`, `{"actions":[]}`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		a, err := decodeAction(body, testScreen, []string{"body"})
		if err != nil {
			var se *serde.Error
			var ae *api.Error
			if !errors.As(err, &se) && !(errors.As(err, &ae) && api.Status(err) == 400) {
				t.Fatalf("%q: %T %v", body, err, err)
			}
			return
		}
		if !slices.Contains(actionTypes, a.Type) || a.NumClicks < 1 || a.NumClicks > 3 || abs(a.DX) > 1<<31 || a.Duration < 0 || a.Duration > maxWait {
			t.Fatalf("%q: %+v", body, a)
		}
		if a.Type == "SCROLL" && (abs(a.DX) > maxScroll || abs(a.DY) > maxScroll || a.DX == 0 && a.DY == 0) {
			t.Fatalf("%q: %+v", body, a)
		}
		if a.HasXY && (a.X < 0 || a.Y < 0 || a.X >= testScreen.Width || a.Y >= testScreen.Height) {
			t.Fatalf("%q: off screen %+v", body, a)
		}
		for _, k := range a.Keys {
			if k == "" {
				t.Fatalf("%q: empty keysym", body)
			}
		}
	})
}

// FuzzKeysym: a name resolves to a non-empty keysym or not at all.
func FuzzKeysym(f *testing.F) {
	for _, s := range []string{"a", "enter", "hyper", "ArrowLeft", "+", "f12", "num5", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		s, ok := keysym(name)
		if ok && (s == "" || strings.ContainsAny(s, " +")) {
			t.Fatalf("%q → %q", name, s)
		}
		if syms, _, ok := hotkeySyms([]string{name}); ok && len(syms) == 0 {
			t.Fatalf("%q: no keysyms", name)
		}
	})
}
