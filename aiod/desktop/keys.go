package desktop

import (
	"fmt"
	"strings"
)

// Key names follow pyautogui (the AIO 1.x contract): multi-letter names
// are case-insensitive ("Enter" is "enter"), one-character names are
// the character itself and case-sensitive ("A" is shift+a). Every name
// resolves here, in Go, to an X keysym name before anything is sent:
// xdotool only warns about a name it does not know and exits 0, so an
// unknown key must never reach it.

// keyAliases are the 1.x spellings accepted for pyautogui names.
var keyAliases = map[string]string{
	"control":    "ctrl",
	"meta":       "alt",
	"super":      "win",
	"altgr":      "altright",
	"arrowleft":  "left",
	"arrowright": "right",
	"arrowup":    "up",
	"arrowdown":  "down",
	"minus":      "-",
	"plus":       "+",
	"mute":       "volumemute",
}

// namedKeys maps pyautogui's multi-character key names to X keysym
// names. pyautogui names with no X keysym (accept, fn, final) are
// absent, so they are refused like any unknown name.
var namedKeys = map[string]string{
	"add": "KP_Add", "alt": "Alt_L", "altleft": "Alt_L", "altright": "Alt_R", "apps": "Menu",
	"backspace": "BackSpace", "browserback": "XF86Back", "browserfavorites": "XF86Favorites",
	"browserforward": "XF86Forward", "browserhome": "XF86HomePage", "browserrefresh": "XF86Refresh",
	"browsersearch": "XF86Search", "browserstop": "XF86Stop", "capslock": "Caps_Lock", "clear": "Clear",
	"command": "Super_L", "convert": "Henkan", "ctrl": "Control_L", "ctrlleft": "Control_L",
	"ctrlright": "Control_R", "decimal": "KP_Decimal", "del": "Delete", "delete": "Delete",
	"divide": "KP_Divide", "down": "Down", "end": "End", "enter": "Return", "esc": "Escape",
	"escape": "Escape", "execute": "Execute", "hanguel": "Hangul", "hangul": "Hangul",
	"hanja": "Hangul_Hanja", "help": "Help", "home": "Home", "insert": "Insert", "junja": "Hangul_Jeonja",
	"kana": "Katakana", "kanji": "Kanji", "launchapp1": "XF86Launch1", "launchapp2": "XF86Launch2",
	"launchmail": "XF86Mail", "launchmediaselect": "XF86AudioMedia", "left": "Left",
	"modechange": "Mode_switch", "multiply": "KP_Multiply", "nexttrack": "XF86AudioNext",
	"nonconvert": "Muhenkan", "numlock": "Num_Lock", "option": "Alt_L", "optionleft": "Alt_L",
	"optionright": "Alt_R", "pagedown": "Next", "pageup": "Prior", "pause": "Pause", "pgdn": "Next",
	"pgup": "Prior", "playpause": "XF86AudioPlay", "prevtrack": "XF86AudioPrev", "print": "Print",
	"printscreen": "Print", "prntscrn": "Print", "prtsc": "Print", "prtscr": "Print", "return": "Return",
	"right": "Right", "scrolllock": "Scroll_Lock", "select": "Select", "separator": "KP_Separator",
	"shift": "Shift_L", "shiftleft": "Shift_L", "shiftright": "Shift_R", "sleep": "XF86Sleep",
	"space": "space", "stop": "XF86AudioStop", "subtract": "KP_Subtract", "tab": "Tab", "up": "Up",
	"volumedown": "XF86AudioLowerVolume", "volumemute": "XF86AudioMute",
	"volumeup": "XF86AudioRaiseVolume", "win": "Super_L", "winleft": "Super_L", "winright": "Super_R",
	"yen": "yen",
}

// charKeys maps the printable ASCII characters that are not letters or
// digits, and pyautogui's whitespace names, to X keysym names.
var charKeys = map[string]string{
	" ": "space", "!": "exclam", "\"": "quotedbl", "#": "numbersign", "$": "dollar", "%": "percent",
	"&": "ampersand", "'": "apostrophe", "(": "parenleft", ")": "parenright", "*": "asterisk",
	"+": "plus", ",": "comma", "-": "minus", ".": "period", "/": "slash", ":": "colon", ";": "semicolon",
	"<": "less", "=": "equal", ">": "greater", "?": "question", "@": "at", "[": "bracketleft",
	"\\": "backslash", "]": "bracketright", "^": "asciicircum", "_": "underscore", "`": "grave",
	"{": "braceleft", "|": "bar", "}": "braceright", "~": "asciitilde",
	"\t": "Tab", "\n": "Return", "\r": "Return",
}

// hyperKeys is what `hyper` stands for in a HOTKEY.
var hyperKeys = []string{"Control_L", "Alt_L", "Shift_L"}

func init() {
	for i := 1; i <= 24; i++ {
		namedKeys[fmt.Sprintf("f%d", i)] = fmt.Sprintf("F%d", i)
	}
	for i := 0; i <= 9; i++ {
		namedKeys[fmt.Sprintf("num%d", i)] = fmt.Sprintf("KP_%d", i)
	}
}

// keysym resolves one pyautogui key name to its X keysym name; ok is
// false for a name that is not in the table. hyper is refused here: it
// is only a HOTKEY member (see hotkeySyms).
func keysym(name string) (string, bool) {
	if len(name) == 1 {
		c := name[0]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
			return name, true
		}
		s, ok := charKeys[name]
		return s, ok
	}
	n := strings.ToLower(name)
	if a, ok := keyAliases[n]; ok {
		n = a
		if len(n) == 1 {
			return keysym(n)
		}
	}
	s, ok := namedKeys[n]
	return s, ok
}

// hotkeySyms resolves a HOTKEY's keys, in order, expanding hyper to
// ctrl+alt+shift; the index of the first unknown name is returned with
// ok false.
func hotkeySyms(keys []string) (syms []string, bad int, ok bool) {
	for i, k := range keys {
		if strings.EqualFold(k, "hyper") {
			syms = append(syms, hyperKeys...)
			continue
		}
		s, ok := keysym(k)
		if !ok {
			return nil, i, false
		}
		syms = append(syms, s)
	}
	return syms, 0, true
}
