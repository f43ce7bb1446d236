package browser

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// ax builds an AX node for the tests.
func ax(id, parent, role, name string, backend int64, ignored bool, children ...string) axNode {
	n := axNode{NodeID: id, ParentID: parent, Ignored: ignored, ChildIDs: children, BackendDOMNodeID: backend}
	if role != "" {
		n.Role = &struct {
			Value json.RawMessage `json:"value"`
		}{json.RawMessage(`"` + role + `"`)}
	}
	if name != "" {
		n.Name = &struct {
			Value json.RawMessage `json:"value"`
		}{json.RawMessage(`"` + name + `"`)}
	}
	return n
}

func greeterAX() []axNode {
	return []axNode{
		ax("1", "", "RootWebArea", "Greeter", 1, false, "2"),
		ax("2", "1", "none", "", 2, true, "3", "4", "5", "6"),
		ax("3", "2", "textbox", "Name", 10, false),
		ax("4", "2", "button", "Greet", 11, false, "7"),
		ax("7", "4", "StaticText", "Greet", 12, false, "8"),
		ax("8", "7", "InlineTextBox", "Greet", 0, false),
		ax("5", "2", "generic", "", 13, false, "9"),
		ax("9", "5", "link", "Other page", 14, false),
		ax("6", "2", "paragraph", "", 15, false),
	}
}

func TestBuildTree(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []axNode
		only  bool
		want  string
	}{
		{"full", greeterAX(), false,
			`{"role":"RootWebArea","name":"Greeter","children":[{"role":"textbox","name":"Name","ref":"e10"},{"role":"button","name":"Greet","ref":"e11","children":[{"role":"StaticText","name":"Greet"}]},{"role":"link","name":"Other page","ref":"e14"},{"role":"paragraph","name":""}]}`},
		{"interactive only", greeterAX(), true,
			`{"role":"RootWebArea","name":"Greeter","children":[{"role":"textbox","name":"Name","ref":"e10"},{"role":"button","name":"Greet","ref":"e11"},{"role":"link","name":"Other page","ref":"e14"}]}`},
		{"empty", nil, false, `{"role":"RootWebArea","name":""}`},
		{"cycle", []axNode{ax("1", "", "RootWebArea", "", 1, false, "2"), ax("2", "1", "button", "b", 2, false, "1", "2")}, false,
			`{"role":"RootWebArea","name":"","children":[{"role":"button","name":"b","ref":"e2"}]}`},
	} {
		b, _ := json.Marshal(buildTree(tc.nodes, tc.only))
		if string(b) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, b, tc.want)
		}
	}
}

func TestBuildTreeLimits(t *testing.T) {
	// A chain deeper than maxSnapshotDepth.
	var deep []axNode
	for i := 0; i < maxSnapshotDepth+10; i++ {
		parent := ""
		if i > 0 {
			parent = fmt.Sprint(i - 1)
		}
		deep = append(deep, ax(fmt.Sprint(i), parent, "group", "g", int64(i+1), false, fmt.Sprint(i+1)))
	}
	if root := buildTree(deep, false); !root.Truncated {
		t.Error("a deep tree is not truncated")
	}
	// More nodes than maxSnapshotNodes.
	wide := []axNode{ax("r", "", "RootWebArea", "", 1, false)}
	for i := 0; i < maxSnapshotNodes+5; i++ {
		id := fmt.Sprint("b", i)
		wide[0].ChildIDs = append(wide[0].ChildIDs, id)
		wide = append(wide, ax(id, "r", "button", "b", int64(i+2), false))
	}
	for _, only := range []bool{false, true} {
		root := buildTree(wide, only)
		if !root.Truncated || len(root.Children) != maxSnapshotNodes-1 {
			t.Errorf("only=%v: truncated %v with %d children", only, root.Truncated, len(root.Children))
		}
	}
	if root := buildTree(greeterAX(), false); root.Truncated {
		t.Error("a small tree is truncated")
	}
	b, _ := json.Marshal(buildTree(deep, false))
	if !strings.HasSuffix(string(b), `"truncated":true}`) {
		t.Errorf("truncated not on the root: %s", b[len(b)-40:])
	}
}
