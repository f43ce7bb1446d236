package smcp

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParseVersion(t *testing.T) {
	valid := []struct {
		in   string
		want Version
		str  string
	}{
		{"0.3.0", Version{0, 3, 0}, "0.3.0"},
		{"1.22.333", Version{1, 22, 333}, "1.22.333"},
		{"01.2.03", Version{1, 2, 3}, "1.2.3"},
		{"0000000001.0.0", Version{1, 0, 0}, "1.0.0"},
		{"2147483647.2147483647.2147483647", Version{2147483647, 2147483647, 2147483647}, "2147483647.2147483647.2147483647"},
	}
	for _, tt := range valid {
		got, err := ParseVersion(tt.in)
		if err != nil || got != tt.want || got.String() != tt.str {
			t.Errorf("ParseVersion(%q) = %v (%q), %v; want %v", tt.in, got, got.String(), err, tt.want)
		}
	}
	invalid := []string{
		"", "abc", "1", "1.2", "1.2.3.4", "1..3", ".1.2", "1.2.", "...",
		"0.3.0-dev", "1.2.3+build", "v1.2.3", "+1.2.3", "-1.2.3", "1.-2.3",
		" 1.2.3", "1.2.3 ", "1.2.3\n", "1. 2.3", "1_0.2.3", "1.2.3\x00",
		"１.2.3", "1.2.0x3", "1.2.3e0",
		"2147483648.0.0", "0.2147483648.0", "00000000001.0.0", "99999999999999999999.0.0",
		strings.Repeat("9", 1<<16), strings.Repeat("1.", 100) + "1",
	}
	for _, in := range invalid {
		v, err := ParseVersion(in)
		if err == nil {
			t.Errorf("ParseVersion(%q) = %v, want error", in, v)
			continue
		}
		if !errors.Is(err, ErrInvalidVersion) {
			t.Errorf("ParseVersion(%q) error %v does not wrap ErrInvalidVersion", in, err)
		}
		if len(err.Error()) > 200 {
			t.Errorf("ParseVersion(%.20q...) error is %d bytes long", in, len(err.Error()))
		}
	}
}

func TestCompatible(t *testing.T) {
	tests := []struct {
		client, server string
		want           bool
	}{
		{"0.2.0", "0.2.0", true},
		{"0.2.1", "0.2.0", true},
		{"0.2.0", "0.2.9", true},
		{"0.2.0", "0.3.0", false},
		{"0.3.0", "0.2.0", false},
		{"1.0.0", "0.2.0", false},
		{"0.2.0", "1.2.0", false},
		{"1.0.0", "1.2.0", true},
		{"1.2.0", "1.2.5", true},
		{"1.2.0", "1.0.0", false},
		{"2.0.0", "1.9.0", false},
	}
	for _, tt := range tests {
		c, _ := ParseVersion(tt.client)
		s, _ := ParseVersion(tt.server)
		if got := Compatible(c, s); got != tt.want {
			t.Errorf("Compatible(client %s, server %s) = %v, want %v", tt.client, tt.server, got, tt.want)
		}
	}
}

// TestCheckVersionMatrix is the versioning test matrix of the specification
// (smcp-core §4.4), plus the suffix and configuration cases.
func TestCheckVersionMatrix(t *testing.T) {
	tests := []struct {
		client, server string
		code           int // 0 = connect
		message        string
	}{
		{"0.2.0", "0.2.0", 0, ""},
		{"0.2.1", "0.2.0", 0, ""},
		{"0.2.0", "0.3.0", 4008, "Protocol version mismatch"},
		{"0.3.0", "0.2.0", 4008, "Protocol version mismatch"},
		{"1.0.0", "0.2.0", 4008, "Protocol version mismatch"},
		{"1.0.0", "1.2.0", 0, ""},
		{"1.2.0", "1.0.0", 4008, "Protocol version mismatch"},
		{"", "0.2.0", 400, "Missing a2c_version query parameter"},
		{"abc", "0.2.0", 400, `Invalid a2c_version: "abc" (want MAJOR.MINOR.PATCH)`},
		{ProtocolVersion, ProtocolVersion, 0, ""},
		{"0.3.0-dev", "0.3.0", 400, `Invalid a2c_version: "0.3.0-dev" (components must be decimal digits, want MAJOR.MINOR.PATCH)`},
		{"0.3.0", "0.3.0-dev", 500, "Invalid server protocol version"},
	}
	for _, tt := range tests {
		got := CheckVersion(tt.client, tt.server)
		switch {
		case tt.code == 0 && got != nil:
			t.Errorf("CheckVersion(%q, %q) = %v, want nil", tt.client, tt.server, got)
		case tt.code != 0 && (got == nil || got.Code != tt.code || got.Message != tt.message):
			t.Errorf("CheckVersion(%q, %q) = %v, want %d %q", tt.client, tt.server, got, tt.code, tt.message)
		}
		if got != nil && got.Code == CodeVersionMismatch &&
			(got.ClientVersion != tt.client || got.ServerVersion != tt.server) {
			t.Errorf("4008 carries client %q server %q", got.ClientVersion, got.ServerVersion)
		}
	}
}

func TestCheckVersion4008Body(t *testing.T) {
	got, err := json.Marshal(CheckVersion("0.1.5", "0.2.0"))
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"code":4008,"message":"Protocol version mismatch","server_version":"0.2.0","client_version":"0.1.5","min_supported":"0.2.0","max_supported":"0.2.999"}`
	if string(got) != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
}

func TestCheckVersionDetailIsShortAndSafe(t *testing.T) {
	inputs := []string{
		strings.Repeat("A", 1<<20),
		strings.Repeat("\xff", 500),
		"\x1b[31mred\x1b[0m\r\n" + strings.Repeat("é", 100),
		"<script>alert(1)</script>",
	}
	for _, in := range inputs {
		e := CheckVersion(in, "0.3.0")
		if e == nil || e.Code != CodeBadRequest {
			t.Fatalf("CheckVersion(%.20q) = %v", in, e)
		}
		if len(e.Message) > 200 {
			t.Errorf("message is %d bytes: %.80q", len(e.Message), e.Message)
		}
		for _, r := range e.Message {
			if r < 0x20 || r > 0x7e {
				t.Errorf("message has non-printable %U: %q", r, e.Message)
				break
			}
		}
	}
}
