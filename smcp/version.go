package smcp

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Version is a protocol version MAJOR.MINOR.PATCH.
type Version struct {
	Major, Minor, Patch int
}

// ErrInvalidVersion is wrapped by every error [ParseVersion] returns.
var ErrInvalidVersion = errors.New("smcp: invalid version")

// maxComponentDigits bounds one component: math.MaxInt32 has ten digits.
const maxComponentDigits = 10

// ParseVersion parses s as MAJOR.MINOR.PATCH: exactly three components
// separated by '.', each made only of ASCII decimal digits (no sign, no
// spaces, no pre-release or build suffix, so "0.3.0-dev" is invalid), at
// most ten digits long and at most math.MaxInt32 in value.
//
// Leading zeros are accepted, as by the reference parser, which converts
// each component with int(): "01.2.3" is 1.2.3 and [Version.String]
// returns "1.2.3".
//
// The error wraps [ErrInvalidVersion] and quotes at most a short, escaped
// prefix of s.
func ParseVersion(s string) (Version, error) {
	v, reason := parseVersion(s)
	if reason != "" {
		return Version{}, fmt.Errorf("%w %s: %s", ErrInvalidVersion, quoteShort(s, 32), reason)
	}
	return v, nil
}

// parseVersion returns the parsed version, or a short reason why s is not
// one. The reason never contains s.
func parseVersion(s string) (Version, string) {
	const want = "want MAJOR.MINOR.PATCH"
	if len(s) > 3*maxComponentDigits+2 {
		return Version{}, "too long, " + want
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return Version{}, want
	}
	var n [3]int
	for i, p := range parts {
		if p == "" {
			return Version{}, "empty component, " + want
		}
		if len(p) > maxComponentDigits {
			return Version{}, "component out of range"
		}
		for j := 0; j < len(p); j++ {
			if p[j] < '0' || p[j] > '9' {
				return Version{}, "components must be decimal digits, " + want
			}
		}
		x, err := strconv.ParseUint(p, 10, 64)
		if err != nil || x > math.MaxInt32 {
			return Version{}, "component out of range"
		}
		n[i] = int(x)
	}
	return Version{n[0], n[1], n[2]}, ""
}

// String returns v as "MAJOR.MINOR.PATCH" without leading zeros.
func (v Version) String() string {
	return strconv.Itoa(v.Major) + "." + strconv.Itoa(v.Minor) + "." + strconv.Itoa(v.Patch)
}

// Compatible reports whether a client speaking client may connect to a
// server speaking server. Before 1.0 MAJOR and MINOR must be equal and
// PATCH is free; from 1.0 on MAJOR must be equal and the client's MINOR
// must not exceed the server's.
func Compatible(client, server Version) bool {
	if client.Major != server.Major {
		return false
	}
	if server.Major == 0 {
		return client.Minor == server.Minor
	}
	return client.Minor <= server.Minor
}

// CheckVersion is the Server's connect-time version gate. raw is the value
// of the [QueryVersion] query parameter ("" when missing) and server the
// version the Server speaks. It returns nil when the client may connect;
// otherwise the ErrorPayload to send as the HTTP 400 body:
//
//   - 400 "Missing a2c_version query parameter" when raw is "";
//   - 400 "Invalid a2c_version: <detail>" when raw does not parse, where the
//     detail quotes at most 32 bytes of raw, escaped to printable ASCII;
//   - the 4008 of [VersionMismatch] when the versions are incompatible.
//
// A server that does not parse is a configuration fault and yields a 500.
func CheckVersion(raw, server string) *Error {
	s, reason := parseVersion(server)
	if reason != "" {
		return NewError(CodeInternal, "Invalid server protocol version")
	}
	if raw == "" {
		return NewError(CodeBadRequest, "Missing a2c_version query parameter")
	}
	c, reason := parseVersion(raw)
	if reason != "" {
		return NewError(CodeBadRequest, "Invalid a2c_version: "+quoteShort(raw, 32)+" ("+reason+")")
	}
	if !Compatible(c, s) {
		return VersionMismatch(server, raw)
	}
	return nil
}
