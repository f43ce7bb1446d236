package market

import (
	"slices"

	"github.com/a2c-smcp/a2c-go/computer/settings"
)

// This file is the one rule of trust in a marketplace. A marketplace's
// plugins run programs, so only the operator's own scopes vouch for it:
// the user's and the policy's trustedMarketplaces (by url), or a
// declaration in the user's own extraKnownMarketplaces. A working
// directory (a cloned repository: its project settings, and local
// settings that may be committed) can declare a marketplace, but a boot
// clones it only once the operator trusts its url (so a repository
// makes this machine connect nowhere, and strictKnownMarketplaces, which
// asks for that, always holds), and it can never move a marketplace the
// user knows to another url. blockedMarketplaces (by
// url or name, any scope that may supply it) wins over every trust.

// trustedURL reports whether the operator trusts the marketplace name at
// url (see the file's comment).
func trustedURL(merged *settings.Merged, name, url string) bool {
	if blockedMarketplace(merged, name, url) {
		return false
	}
	for _, s := range []settings.Scope{settings.User, settings.Policy} {
		if slices.Contains(stringList(merged.Layer(s).Values["trustedMarketplaces"]), url) {
			return true
		}
	}
	return declaredURL(merged, settings.User, name) == url
}

// blockedMarketplace reports whether blockedMarketplaces names the
// marketplace (by url or by name).
func blockedMarketplace(merged *settings.Merged, name, url string) bool {
	blocked := stringList(merged.Values["blockedMarketplaces"])
	return slices.Contains(blocked, url) || slices.Contains(blocked, name)
}

// declaredURL is the url scope s's extraKnownMarketplaces gives name
// ("" when it does not declare it).
func declaredURL(merged *settings.Merged, s settings.Scope, name string) string {
	decl, _ := merged.Layer(s).Values["extraKnownMarketplaces"].(map[string]any)
	d, _ := decl[name].(map[string]any)
	src, _ := d["source"].(map[string]any)
	url, _ := src["url"].(string)
	return url
}
