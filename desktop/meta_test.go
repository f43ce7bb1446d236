package desktop

import (
	"encoding/json"
	"math"
	"testing"
)

func TestNormalizePriority(t *testing.T) {
	tests := []struct {
		in   float64
		want float64
		warn bool
	}{
		{0, 0, false},
		{0.5, 0.5, false},
		{1, 1, false},
		{math.SmallestNonzeroFloat64, math.SmallestNonzeroFloat64, false},
		{1.0000001, 0, true},
		{80, 0, true},
		{-0.1, 0, true},
		{math.Inf(1), 0, true},
		{math.Inf(-1), 0, true},
		{math.NaN(), 0, true},
	}
	for _, tt := range tests {
		got, warn := NormalizePriority(tt.in)
		if got != tt.want || warn != tt.warn {
			t.Errorf("NormalizePriority(%v) = %v, %v; want %v, %v", tt.in, got, warn, tt.want, tt.warn)
		}
	}
}

func TestFullscreenFromMeta(t *testing.T) {
	tests := []struct {
		name, meta string // meta is JSON for _meta; "" for nil
		want, warn bool
	}{
		{"nil meta", "", false, false},
		{"empty meta", `{}`, false, false},
		{"other keys", `{"x":true}`, false, false},
		{"null", `{"fullscreen":null}`, false, false},
		{"true", `{"fullscreen":true}`, true, false},
		{"false", `{"fullscreen":false}`, false, false},
		{"string", `{"fullscreen":"true"}`, false, true},
		{"number", `{"fullscreen":1}`, false, true},
		{"object", `{"fullscreen":{}}`, false, true},
	}
	for _, tt := range tests {
		var meta map[string]any
		if tt.meta != "" {
			if err := json.Unmarshal([]byte(tt.meta), &meta); err != nil {
				t.Fatal(err)
			}
		}
		got, warn := FullscreenFromMeta(meta)
		if got != tt.want || warn != tt.warn {
			t.Errorf("%s: FullscreenFromMeta(%s) = %v, %v; want %v, %v", tt.name, tt.meta, got, warn, tt.want, tt.warn)
		}
	}
}

func TestAudienceWarning(t *testing.T) {
	tests := []struct {
		name     string
		audience []string
		want     bool
	}{
		{"absent", nil, false},
		{"assistant", []string{"assistant"}, false},
		{"both", []string{"user", "assistant"}, false},
		{"user only", []string{"user"}, true},
		{"empty list", []string{}, true},
		{"case matters", []string{"Assistant"}, true},
	}
	for _, tt := range tests {
		if got := AudienceWarning(tt.audience); got != tt.want {
			t.Errorf("%s: AudienceWarning(%q) = %v, want %v", tt.name, tt.audience, got, tt.want)
		}
	}
}
