package desktop

import "math"

// MetaFullscreen is the _meta key of a window resource that marks it
// fullscreen.
const MetaFullscreen = "fullscreen"

// AudienceAssistant is the annotations.audience role a window resource
// should declare.
const AudienceAssistant = "assistant"

// NormalizePriority returns the priority a window with annotations.priority
// p organises by. A value in [0, 1] is returned unchanged; anything else
// (out of range, NaN, ±Inf) counts as 0 and warn is true: the Computer logs
// a warning. An absent annotations object or an absent priority counts as
// 0 too, without a warning; pass 0.
func NormalizePriority(p float64) (priority float64, warn bool) {
	if math.IsNaN(p) || p < 0 || p > 1 {
		return 0, true
	}
	return p, false
}

// FullscreenFromMeta returns the fullscreen flag of a window resource whose
// _meta is meta. A nil meta or an absent "fullscreen" key (or a JSON null)
// means false. A bool is returned as is. Any other value means false and
// warn is true: the Computer logs a warning.
func FullscreenFromMeta(meta map[string]any) (fullscreen, warn bool) {
	v, ok := meta[MetaFullscreen]
	if !ok || v == nil {
		return false, false
	}
	b, ok := v.(bool)
	if !ok {
		return false, true
	}
	return b, false
}

// AudienceWarning reports whether a window resource whose
// annotations.audience is audience must be warned about: the list is
// present (non-nil) but does not include "assistant". The window is
// organised all the same; this is a warning, not a filter.
func AudienceWarning(audience []string) bool {
	if audience == nil {
		return false
	}
	for _, a := range audience {
		if a == AudienceAssistant {
			return false
		}
	}
	return true
}
