package skill

import (
	"strings"
	"testing"
)

func TestParseName(t *testing.T) {
	long := strings.Repeat("a", 64)
	tests := []struct {
		name string
		want Name
		ok   bool
	}{
		// The specification's examples.
		{"acme-audit:audit", Name{Kind: KindMarketplace, Plugin: "acme-audit", Leaf: "audit"}, true},
		{"pylint-tools:lint", Name{Kind: KindMarketplace, Plugin: "pylint-tools", Leaf: "lint"}, true},
		{"my-helper", Name{Kind: KindUser, Leaf: "my-helper"}, true},
		{"mcp:tfrobot-tools:code-review", Name{Kind: KindMCP, Server: "tfrobot-tools", Leaf: "code-review"}, true},
		{"mcp:my_api:csv-aggregator", Name{Kind: KindMCP, Server: "my_api", Leaf: "csv-aggregator"}, true},
		{"mcp:acme-editor:format", Name{Kind: KindMCP, Server: "acme-editor", Leaf: "format"}, true},
		{"mcp:bundle_a1b2c3d4e5f60718:summarize", Name{Kind: KindMCP, Server: "bundle_a1b2c3d4e5f60718", Leaf: "summarize"}, true},
		// A plugin named mcp is still a 2-segment marketplace name.
		{"mcp:summarize", Name{Kind: KindMarketplace, Plugin: "mcp", Leaf: "summarize"}, true},
		// bundle_id edges the lexer accepts (A6): case, leading/trailing _ and -.
		{"mcp:My-Server:x", Name{Kind: KindMCP, Server: "My-Server", Leaf: "x"}, true},
		{"mcp:_a-:x", Name{Kind: KindMCP, Server: "_a-", Leaf: "x"}, true},
		{long, Name{Kind: KindUser, Leaf: long}, true},
		{"a1", Name{Kind: KindUser, Leaf: "a1"}, true},
		// Refused.
		{"", Name{}, false},
		{long + "a", Name{}, false},
		{"a:b:c", Name{}, false},       // 3 segments, first not mcp
		{"MCP:s:x", Name{}, false},     // the literal is lower case
		{"mcp:a:b:c", Name{}, false},   // 4 segments
		{"a:b:c:d:e", Name{}, false},   //
		{"mcp:a.b:x", Name{}, false},   // '.' in bundle_id
		{"mcp:a__b:x", Name{}, false},  // "__" in bundle_id
		{"mcp::x", Name{}, false},      // empty bundle_id
		{"mcp:s:", Name{}, false},      // empty leaf
		{":x", Name{}, false},          // empty plugin
		{"x:", Name{}, false},          //
		{"-a", Name{}, false},          // leading '-'
		{"a-", Name{}, false},          // trailing '-'
		{"a--b", Name{}, false},        // "--"
		{"My-helper", Name{}, false},   // upper case
		{"my_helper", Name{}, false},   // '_' in a leaf
		{"my helper", Name{}, false},   //
		{"Plugin:x", Name{}, false},    // upper-case plugin
		{"mcp:s:Code", Name{}, false},  // upper-case leaf
		{"../etc", Name{}, false},      //
		{"a/b", Name{}, false},         //
		{"héllo", Name{}, false},       //
		{"mcp:s:x\x00", Name{}, false}, //
		{"mcp:s%2Fx:y", Name{}, false}, //
		{"plugin:a--b", Name{}, false}, //
		{"mcp:" + long + ":x", Name{Kind: KindMCP, Server: long, Leaf: "x"}, true},
	}
	for _, tt := range tests {
		got, err := ParseName(tt.name)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseName(%q) = %+v, %v; want %+v ok=%v", tt.name, got, err, tt.want, tt.ok)
		}
		if tt.ok && got.String() != tt.name {
			t.Errorf("String() = %q, want %q", got.String(), tt.name)
		}
	}
	if MCPName("b", "x") != "mcp:b:x" || MCPSourceName("b") != "mcp:b" {
		t.Error("MCPName/MCPSourceName")
	}
}

func FuzzParseName(f *testing.F) {
	for _, s := range []string{"my-helper", "a:b", "mcp:b:c", "mcp:a__b:c", "--", "a:b:c:d", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseName(s)
		if err != nil {
			return
		}
		if n.String() != s {
			t.Fatalf("round trip %q -> %q", s, n.String())
		}
		if !ValidLeaf(n.Leaf) || strings.ContainsAny(s, "/\\. \x00") && n.Kind != KindMCP {
			t.Fatalf("accepted %q", s)
		}
	})
}
