// Package redact masks secrets in text that is about to be logged or shown
// to a peer: the one rule for URLs, shared by the Computer's configuration,
// the daemon's command line and its MCP upstreams.
package redact

import "strings"

// Mask replaces every redacted value.
const Mask = "******"

// URL masks the user information, the query values and the fragment of u.
// It works on the text, so that URLs that do not parse (or hold
// placeholders such as ${input:token}) are handled too.
func URL(u string) string {
	frag := ""
	if i := strings.IndexByte(u, '#'); i >= 0 {
		u, frag = u[:i], "#"+Mask
	}
	query := ""
	if i := strings.IndexByte(u, '?'); i >= 0 {
		parts := strings.Split(u[i+1:], "&")
		for j, p := range parts {
			if k, v, ok := strings.Cut(p, "="); ok && v != "" {
				parts[j] = k + "=" + Mask
			} else if !ok && p != "" {
				parts[j] = Mask
			}
		}
		u, query = u[:i], "?"+strings.Join(parts, "&")
	}
	if i := strings.Index(u, "://"); i >= 0 {
		rest := u[i+3:]
		host := rest
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			host = rest[:j]
		}
		if at := strings.LastIndexByte(host, '@'); at >= 0 {
			u = u[:i+3] + Mask + rest[at:]
		}
	}
	return u + query + frag
}
