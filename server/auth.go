package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// AuthRequest is what a connecting client presented: the HTTP request that
// opened its session and the auth object of its Socket.IO CONNECT packet.
type AuthRequest struct {
	Header     http.Header
	Query      url.Values
	RemoteAddr string
	// Auth is the CONNECT packet's auth object (raw JSON), or nil.
	Auth json.RawMessage
}

// Authenticator decides whether a client may connect. A non-nil error
// refuses the connection; the client sees "unauthorized" and never the
// error's text, which is only logged.
type Authenticator interface {
	Authenticate(ctx context.Context, r *AuthRequest) error
}

// AuthFunc adapts a function to [Authenticator].
type AuthFunc func(ctx context.Context, r *AuthRequest) error

// Authenticate calls f.
func (f AuthFunc) Authenticate(ctx context.Context, r *AuthRequest) error { return f(ctx, r) }

// ErrBadCredentials is what [TokenAuth] reports for a missing or wrong
// credential.
var ErrBadCredentials = errors.New("missing or wrong credential")

// TokenAuth accepts a client that presents token in field: as a field of
// the CONNECT auth object, as an HTTP header of that name, or as
// "Authorization: Bearer <token>". Comparison is in constant time.
func TokenAuth(token, field string) Authenticator {
	want := sha256.Sum256([]byte(token))
	match := func(got string) bool {
		h := sha256.Sum256([]byte(got))
		return got != "" && subtle.ConstantTimeCompare(h[:], want[:]) == 1
	}
	return AuthFunc(func(_ context.Context, r *AuthRequest) error {
		if len(r.Auth) > 0 {
			var m map[string]json.RawMessage
			if json.Unmarshal(r.Auth, &m) == nil {
				var v string
				if json.Unmarshal(m[field], &v) == nil && match(v) {
					return nil
				}
			}
		}
		if match(r.Header.Get(field)) {
			return nil
		}
		if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") && match(a[7:]) {
			return nil
		}
		return ErrBadCredentials
	})
}
