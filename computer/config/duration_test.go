package config

import (
	"math"
	"testing"
	"time"
)

func TestParseISODuration(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr string
	}{
		{"PT30S", 30 * time.Second, ""},
		{"PT5M", 5 * time.Minute, ""},
		{"PT2H", 2 * time.Hour, ""},
		{"P1D", 24 * time.Hour, ""},
		{"P1DT2H", 26 * time.Hour, ""},
		{"P2W", 14 * 24 * time.Hour, ""},
		{"P1W1D", 8 * 24 * time.Hour, ""},
		{"PT1H30M15S", time.Hour + 30*time.Minute + 15*time.Second, ""},
		{"PT0S", 0, ""},
		{"P0D", 0, ""},
		{"PT0.5S", 500 * time.Millisecond, ""},
		{"PT1,25S", 1250 * time.Millisecond, ""},
		{"PT0.000000001S", time.Nanosecond, ""},
		{"PT0.0000000019S", time.Nanosecond, ""}, // digits past the nanosecond are dropped
		{"PT90M", 90 * time.Minute, ""},
		{"PT300S", 5 * time.Minute, ""},
		{"P1DT0.25S", 24*time.Hour + 250*time.Millisecond, ""},
		{"+PT1S", time.Second, ""},
		{"PT2562047H47M16.854775807S", math.MaxInt64, ""},

		{"", 0, "empty duration"},
		{"30", 0, `an ISO 8601 duration starts with "P"`},
		{"30s", 0, `an ISO 8601 duration starts with "P"`},
		{"pt30s", 0, `an ISO 8601 duration starts with "P"`},
		{"+", 0, `an ISO 8601 duration starts with "P"`},
		{"-PT5S", 0, "negative duration"},
		{"P", 0, "no components"},
		{"PT", 0, `"T" must be followed by hours, minutes or seconds`},
		{"P1DT", 0, `"T" must be followed by hours, minutes or seconds`},
		{"P1Y", 0, "years and months are not supported"},
		{"P2M", 0, "years and months are not supported"},
		{"PT1D", 0, "unexpected designator"},
		{"P1H", 0, "unexpected designator"},
		{"P1S", 0, "unexpected designator"},
		{"PT1X", 0, "unexpected designator"},
		{"PT1S1M", 0, "designators out of order or repeated"},
		{"PT1M1M", 0, "designators out of order or repeated"},
		{"P1D1W", 0, "designators out of order or repeated"},
		{"PTT1S", 0, `"T" appears twice`},
		{"PT1H T1S", 0, "expected a number"},
		{"PTS", 0, "expected a number"},
		{"PT-1S", 0, "expected a number"},
		{"PT1", 0, "a number lacks its designator"},
		{"PT1.S", 0, "expected digits after the decimal mark"},
		{"PT.5S", 0, "expected a number"},
		{"PT1.5M", 0, "only seconds may have a fraction"},
		{"P1.5D", 0, "only seconds may have a fraction"},
		{"PT2562048H", 0, "duration out of range"},
		{"P106752D", 0, "duration out of range"},
		{"PT99999999999999999999S", 0, "duration out of range"},
		{"PT2562047H47M17S", 0, "duration out of range"},
	}
	for _, tt := range tests {
		got, err := ParseISODuration(tt.in)
		switch {
		case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
			t.Errorf("ParseISODuration(%q) = %v, %v; want error %q", tt.in, got, err, tt.wantErr)
		case tt.wantErr == "" && (err != nil || got != tt.want):
			t.Errorf("ParseISODuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func FuzzISODuration(f *testing.F) {
	for _, s := range []string{"PT30S", "P1DT2H", "PT0.5S", "-PT1S", "P1W", "PT2562047H47M16.854775807S"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseISODuration(s)
		if err == nil && d < 0 {
			t.Fatalf("ParseISODuration(%q) = %v", s, d)
		}
	})
}
