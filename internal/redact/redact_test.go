package redact

import "testing"

func TestRedactURL(t *testing.T) {
	tests := map[string]string{
		"https://example.com/mcp":                    "https://example.com/mcp",
		"https://u:p@example.com/mcp":                "https://******@example.com/mcp",
		"https://tok@example.com":                    "https://******@example.com",
		"http://h/p?a=1&b=&c":                        "http://h/p?a=******&b=&******",
		"http://h/p#access_token=x":                  "http://h/p#******",
		"http://h/a@b":                               "http://h/a@b",
		"${input:url}":                               "${input:url}",
		"https://h/?key=${input:k}":                  "https://h/?key=******",
		"https://${input:user}:${input:pw}@h/mcp?x=": "https://******@h/mcp?x=",
	}
	for in, want := range tests {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}
