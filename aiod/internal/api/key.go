package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"net/url"
	"strings"
)

// HasKey reports whether r carries key, the one rule of every aiod
// listener that asks for a key (the daemon, its computer-use worker, and
// a2c up's /cdp): Authorization: Bearer (the scheme in any case),
// x-api-key, or the deprecated ?api_key= (percent-decoded once more, as
// the published daemon does). The comparison is of SHA-256 digests, in
// constant time, so neither the key nor its length shows in the timing.
// An empty key matches nothing.
func HasKey(r *http.Request, key string) bool {
	if key == "" {
		return false
	}
	want := sha256.Sum256([]byte(key))
	match := func(got string) bool {
		h := sha256.Sum256([]byte(got))
		return got != "" && subtle.ConstantTimeCompare(h[:], want[:]) == 1
	}
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") && match(a[7:]) {
		return true
	}
	if match(r.Header.Get("X-API-Key")) {
		return true
	}
	if k := r.URL.Query().Get("api_key"); k != "" {
		if dk, err := url.QueryUnescape(k); err == nil {
			k = dk
		}
		return match(k)
	}
	return false
}

// SplitKey parts a raw query into the rest, byte for byte (another
// program may read it whole: Chromium's /json/new?<url>), and its api_key
// parameters, however the name is escaped (api%5Fkey names it too, as
// HasKey reads it): what a proxy forwards after it has checked the key,
// and the credential alone.
func SplitKey(raw string) (rest, key string) {
	if raw == "" {
		return "", ""
	}
	var kept, keys []string
	for p := range strings.SplitSeq(raw, "&") {
		name, _, _ := strings.Cut(p, "=")
		if n, err := url.QueryUnescape(name); err == nil && n == "api_key" {
			keys = append(keys, p)
			continue
		}
		kept = append(kept, p)
	}
	return strings.Join(kept, "&"), strings.Join(keys, "&")
}

// DropCredentials removes from h every header HasKey reads a key from,
// and cookies: what a proxy removes before it forwards a request it has
// admitted, so the client's key goes no further.
func DropCredentials(h http.Header) {
	h.Del("Authorization")
	h.Del("X-Api-Key")
	h.Del("Cookie")
}
