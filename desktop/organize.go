package desktop

import (
	"cmp"
	"slices"
	"strings"
)

// Window is one window:// resource of one MCP server, as the Computer
// gathered it: from resources/list (URI, priority, fullscreen) and
// resources/read (texts).
type Window struct {
	// URI is the resource's uri, verbatim. It is matched against
	// [Options.Window] and rendered as is; [Organize] skips the window when
	// [ParseURI] rejects it.
	URI string
	// Server is the bundle_id of the MCP server the window belongs to: the
	// key windows are grouped and servers are ordered by. Never the display
	// name.
	Server string
	// Texts holds the text of each TextResourceContents the read returned,
	// in order. Blob contents are not rendered and have no place here (the
	// Computer logs a warning for each). A window with no texts (its
	// contents were empty, or blobs only) is skipped. With the MCP Go SDK's
	// ResourceContents, an item is a blob when its Blob is non-nil and a
	// text otherwise, even when that text is empty.
	Texts []string
	// Priority is annotations.priority, in [0, 1], higher first; 0 when
	// absent. A value outside [0, 1] is treated as 0 (see
	// [NormalizePriority]).
	Priority float64
	// Fullscreen is _meta.fullscreen; false when absent (see
	// [FullscreenFromMeta]).
	Fullscreen bool
}

// Options are the parameters of one client:get_desktop request, plus the
// Computer's tool-call history.
type Options struct {
	// Size is desktop_size: nil for no cap; a value <= 0 yields an empty
	// list; a positive value caps the number of entries across all servers.
	Size *int
	// Window is the window filter: nil for none; otherwise only windows
	// whose URI equals *Window exactly are organised (an empty string
	// matches nothing).
	Window *string
	// History lists the bundle_ids of the Computer's recent tool calls,
	// oldest first, newest last; repeats are allowed. The most recently
	// used server comes first. Entries naming no window's server are
	// ignored.
	History []string
}

// Organize returns the client:get_desktop list for the windows ws, as the
// package documentation describes step by step. ws must hold each server's
// windows in the order its resources/list returned them (the first
// fullscreen window and ties in priority are decided by position in ws);
// windows of different servers may interleave. The result is never nil.
// Organize neither modifies ws nor keeps a reference to it.
func Organize(ws []Window, opts Options) []string {
	out := []string{}
	if opts.Size != nil && *opts.Size <= 0 {
		return out
	}
	limit := -1
	if opts.Size != nil {
		limit = *opts.Size
	}

	// Filter and group. Each group keeps its windows in input order.
	type item struct {
		w        *Window
		priority float64
	}
	groups := make(map[string][]item)
	for i := range ws {
		w := &ws[i]
		if opts.Window != nil && w.URI != *opts.Window {
			continue
		}
		if len(w.Texts) == 0 || !IsWindowURI(w.URI) {
			continue
		}
		p, _ := NormalizePriority(w.Priority)
		groups[w.Server] = append(groups[w.Server], item{w, p})
	}

	// Server order: history newest first, then the rest by bundle_id.
	order := make([]string, 0, len(groups))
	seen := make(map[string]bool, len(groups))
	for _, s := range slices.Backward(opts.History) {
		if _, ok := groups[s]; ok && !seen[s] {
			seen[s] = true
			order = append(order, s)
		}
	}
	rest := make([]string, 0, len(groups)-len(order))
	for s := range groups {
		if !seen[s] {
			rest = append(rest, s)
		}
	}
	slices.Sort(rest)
	order = append(order, rest...)

	for _, s := range order {
		if limit >= 0 && len(out) >= limit {
			break
		}
		items := groups[s]
		if i := slices.IndexFunc(items, func(it item) bool { return it.w.Fullscreen }); i >= 0 {
			out = append(out, Entry(*items[i].w))
			continue
		}
		slices.SortStableFunc(items, func(a, b item) int { return cmp.Compare(b.priority, a.priority) })
		for _, it := range items {
			if limit >= 0 && len(out) >= limit {
				break
			}
			out = append(out, Entry(*it.w))
		}
	}
	return out
}

// Entry renders w as one client:get_desktop entry: w.URI, verbatim, then
// "\n\n" and the non-empty texts of w joined by "\n\n". When w has no
// non-empty text the entry is w.URI alone.
func Entry(w Window) string {
	var b strings.Builder
	b.WriteString(w.URI)
	for _, t := range w.Texts {
		if t != "" {
			b.WriteString("\n\n")
			b.WriteString(t)
		}
	}
	return b.String()
}
