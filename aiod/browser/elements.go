package browser

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
	"github.com/a2c-smcp/a2c-go/aiod/internal/serde"
)

// Snapshot limits: a tree past them is cut and its root says so
// (truncated:true).
const (
	maxSnapshotNodes = 2000
	maxSnapshotDepth = 48
)

// interactiveRoles are the accessibility roles that get a ref and that
// interactive_only keeps.
var interactiveRoles = map[string]bool{
	"button": true, "link": true, "textbox": true, "searchbox": true, "checkbox": true, "radio": true,
	"combobox": true, "listbox": true, "option": true, "menuitem": true, "menuitemcheckbox": true,
	"menuitemradio": true, "slider": true, "spinbutton": true, "switch": true, "tab": true, "treeitem": true,
}

// Node is one node of a snapshot: the accessibility role and name, a ref
// on interactive nodes (click and fill take it), the children.
type Node struct {
	Role      string  `json:"role"`
	Name      string  `json:"name"`
	Ref       string  `json:"ref,omitempty"`
	Children  []*Node `json:"children,omitempty"`
	Truncated bool    `json:"truncated,omitempty"`
}

// axNode is the part of CDP's Accessibility.AXNode the plane reads.
type axNode struct {
	NodeID  string `json:"nodeId"`
	Ignored bool   `json:"ignored"`
	Role    *struct {
		Value json.RawMessage `json:"value"`
	} `json:"role"`
	Name *struct {
		Value json.RawMessage `json:"value"`
	} `json:"name"`
	ParentID         string   `json:"parentId"`
	ChildIDs         []string `json:"childIds"`
	BackendDOMNodeID int64    `json:"backendDOMNodeId"`
}

func axString(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) != nil {
		return ""
	}
	return s
}

type snapshotBody struct {
	InteractiveOnly *bool   `json:"interactive_only"`
	TabID           *string `json:"tab_id"`
}

func (p *Plane) snapshot(r *http.Request, in snapshotBody) (*Node, error) {
	ctx := r.Context()
	c, s, err := p.session(ctx, str(in.TabID))
	if err != nil {
		return nil, err
	}
	var res struct {
		Nodes []axNode `json:"nodes"`
	}
	if err := c.call(ctx, s, "Accessibility.getFullAXTree", map[string]any{}, &res); err != nil {
		return nil, cdpFailed(err)
	}
	return buildTree(res.Nodes, in.InteractiveOnly != nil && *in.InteractiveOnly), nil
}

// buildTree turns CDP's flat AX node list into the snapshot tree:
// ignored and unnamed generic nodes give their place to their children,
// inline text boxes (duplicates of their static text) go. Interactive
// nodes get ref e<backendDOMNodeId>. With interactiveOnly the root's
// children are the interactive nodes in document order. The tree stops
// at maxSnapshotNodes nodes and maxSnapshotDepth levels.
func buildTree(nodes []axNode, interactiveOnly bool) *Node {
	if len(nodes) == 0 {
		return &Node{Role: "RootWebArea"}
	}
	byID := make(map[string]*axNode, len(nodes))
	for i := range nodes {
		byID[nodes[i].NodeID] = &nodes[i]
	}
	rootAX := &nodes[0]
	for i := range nodes {
		if nodes[i].ParentID == "" {
			rootAX = &nodes[i]
			break
		}
	}
	b := &treeBuilder{byID: byID, interactiveOnly: interactiveOnly, seen: map[string]bool{}}
	root := b.node(rootAX)
	b.count = 1
	b.seen[rootAX.NodeID] = true
	if interactiveOnly {
		b.flat(rootAX, root, 0)
	} else {
		root.Children = b.children(rootAX, 1)
	}
	root.Truncated = b.truncated
	return root
}

type treeBuilder struct {
	byID            map[string]*axNode
	interactiveOnly bool
	count           int
	truncated       bool
	seen            map[string]bool // guards against a cyclic list
}

func (b *treeBuilder) node(n *axNode) *Node {
	out := &Node{}
	if n.Role != nil {
		out.Role = axString(n.Role.Value)
	}
	if n.Name != nil {
		out.Name = axString(n.Name.Value)
	}
	if interactiveRoles[out.Role] && n.BackendDOMNodeID > 0 {
		out.Ref = "e" + strconv.FormatInt(n.BackendDOMNodeID, 10)
	}
	return out
}

// kept reports whether n shows in the full tree (else its children take
// its place).
func (b *treeBuilder) kept(n *axNode, role, name string) bool {
	if n.Ignored {
		return false
	}
	switch role {
	case "InlineTextBox", "LineBreak":
		return false
	case "generic", "none", "":
		return name != ""
	}
	return true
}

func (b *treeBuilder) children(n *axNode, depth int) []*Node {
	var out []*Node
	for _, id := range n.ChildIDs {
		ch := b.byID[id]
		if ch == nil || b.seen[id] {
			continue
		}
		b.seen[id] = true
		if b.count >= maxSnapshotNodes || depth > maxSnapshotDepth {
			b.truncated = true
			return out
		}
		nd := b.node(ch)
		if !b.kept(ch, nd.Role, nd.Name) {
			if ch.Role != nil && axString(ch.Role.Value) == "InlineTextBox" {
				continue
			}
			out = append(out, b.children(ch, depth)...)
			continue
		}
		b.count++
		nd.Children = b.children(ch, depth+1)
		out = append(out, nd)
	}
	return out
}

// flat appends the interactive descendants of n to root, in order.
func (b *treeBuilder) flat(n *axNode, root *Node, depth int) {
	if depth > maxSnapshotDepth*4 {
		b.truncated = true
		return
	}
	for _, id := range n.ChildIDs {
		ch := b.byID[id]
		if ch == nil || b.seen[id] {
			continue
		}
		b.seen[id] = true
		nd := b.node(ch)
		if !ch.Ignored && nd.Ref != "" {
			if b.count >= maxSnapshotNodes {
				b.truncated = true
				return
			}
			b.count++
			root.Children = append(root.Children, nd)
		}
		b.flat(ch, root, depth+1)
	}
}

// parseRef reads a ref, e<digits>: the backend DOM node id.
func parseRef(ref string) (int64, bool) {
	if len(ref) < 2 || ref[0] != 'e' {
		return 0, false
	}
	for _, c := range ref[1:] {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	id, err := strconv.ParseInt(ref[1:], 10, 64)
	return id, err == nil && id > 0
}

// elementBody is click's body, and the element part of fill's and
// upload's.
type elementBody struct {
	Selector *string `json:"selector"`
	Ref      *string `json:"ref"`
	TabID    *string `json:"tab_id"`
}

// target is the element of a body: by ref (it wins) or selector.
type element struct {
	ref      int64
	selector string
}

func (e elementBody) element() (element, error) {
	switch {
	case e.Ref != nil:
		id, ok := parseRef(*e.Ref)
		if !ok {
			return element{}, api.NewError(api.ErrInvalid, "browser: ref must be e<digits> (from a snapshot), got "+strconv.Quote(*e.Ref))
		}
		return element{ref: id}, nil
	case e.Selector != nil && *e.Selector != "":
		return element{selector: *e.Selector}, nil
	}
	return element{}, api.NewError(api.ErrInvalid, "browser: selector or ref is required")
}

// objectGroups numbers the object groups of element lookups.
var objectGroups atomic.Int64

// object resolves el in session s to a JS object id, in an object group
// of the request's own that the caller releases with its release func
// (the page would otherwise keep every element a lookup resolved): a
// selector matching nothing is a 404, a malformed one a 400.
func (p *Plane) object(ctx context.Context, c *conn, s string, el element) (string, func(), error) {
	group := "aiod-" + strconv.FormatInt(objectGroups.Add(1), 10)
	release := func() {
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = c.call(rctx, s, "Runtime.releaseObjectGroup", map[string]any{"objectGroup": group}, nil)
	}
	obj, err := p.resolve(ctx, c, s, el, group)
	return obj, release, err
}

func (p *Plane) resolve(ctx context.Context, c *conn, s string, el element, group string) (string, error) {
	if el.ref != 0 {
		var res struct {
			Object remoteObject `json:"object"`
		}
		if err := c.call(ctx, s, "DOM.resolveNode", map[string]any{"backendNodeId": el.ref, "objectGroup": group}, &res); err != nil {
			return "", cdpFailed(err)
		}
		return res.Object.ObjectID, nil
	}
	sel, _ := json.Marshal(el.selector)
	var res evalResult
	expr := "(()=>{try{return document.querySelector(" + string(sel) + ")}catch(e){return 'invalid selector'}})()"
	if err := c.call(ctx, s, "Runtime.evaluate", map[string]any{"expression": expr, "objectGroup": group}, &res); err != nil {
		return "", cdpFailed(err)
	}
	switch {
	case res.Result.Type == "string":
		return "", api.NewError(api.ErrInvalid, "browser: invalid selector "+strconv.Quote(el.selector))
	case res.Result.ObjectID == "" || res.Result.Subtype == "null":
		return "", api.NewError(api.ErrNotFound, "browser: no element matches selector "+strconv.Quote(el.selector))
	}
	return res.Result.ObjectID, nil
}

// elementTimeout bounds click, fill and upload.
const elementTimeout = 30 * time.Second

// clickJS is a selector-click: scrolled into view, then the DOM click()
// (no pointer events; a ref-click is a real press and release).
const clickJS = `function(){this.scrollIntoView({block:'center',inline:'center'});this.click();}`

func (p *Plane) click(r *http.Request, in elementBody) (any, error) {
	el, err := in.element()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(r.Context(), elementTimeout)
	defer cancel()
	c, s, err := p.session(ctx, str(in.TabID))
	if err != nil {
		return nil, err
	}
	if el.ref == 0 {
		obj, release, err := p.object(ctx, c, s, el)
		defer release()
		if err != nil {
			return nil, err
		}
		return nil, callOn(ctx, c, s, obj, clickJS, nil, nil)
	}
	if err := c.call(ctx, s, "DOM.scrollIntoViewIfNeeded", map[string]any{"backendNodeId": el.ref}, nil); err != nil {
		return nil, cdpFailed(err)
	}
	var box struct {
		Model struct {
			Content []float64 `json:"content"`
		} `json:"model"`
	}
	if err := c.call(ctx, s, "DOM.getBoxModel", map[string]any{"backendNodeId": el.ref}, &box); err != nil {
		return nil, cdpFailed(err)
	}
	q := box.Model.Content
	if len(q) != 8 {
		return nil, api.NewError(api.ErrUnavailable, "browser: the element has no box").WithHint(Hint)
	}
	x, y := (q[0]+q[2]+q[4]+q[6])/4, (q[1]+q[3]+q[5]+q[7])/4
	for _, t := range []string{"mouseMoved", "mousePressed", "mouseReleased"} {
		ev := map[string]any{"type": t, "x": x, "y": y}
		if t != "mouseMoved" {
			ev["button"], ev["clickCount"] = "left", 1
		}
		if err := c.call(ctx, s, "Input.dispatchMouseEvent", ev, nil); err != nil {
			return nil, cdpFailed(err)
		}
	}
	return nil, nil
}

// callOn runs fn with this = obj and args; its result by value into out.
func callOn(ctx context.Context, c *conn, s, obj, fn string, args []any, out *evalResult) error {
	params := map[string]any{"objectId": obj, "functionDeclaration": fn, "returnByValue": true, "awaitPromise": false}
	if len(args) > 0 {
		as := make([]map[string]any, len(args))
		for i, a := range args {
			as[i] = map[string]any{"value": a}
		}
		params["arguments"] = as
	}
	var res evalResult
	if out == nil {
		out = &res
	}
	if err := c.call(ctx, s, "Runtime.callFunctionOn", params, out); err != nil {
		return cdpFailed(err)
	}
	if out.ExceptionDetails != nil {
		return api.NewError(api.ErrUnavailable, "browser: "+*out.exception()).WithHint(Hint)
	}
	return nil
}

type fillBody struct {
	Value    string  `json:"value" serde:"required"`
	Selector *string `json:"selector"`
	Ref      *string `json:"ref"`
	TabID    *string `json:"tab_id"`
}

// fillJS sets the value with the native setter of the element's own
// prototype (so frameworks that wrap value see it), then sends input and
// change. It answers false for an element that holds no value.
const fillJS = `function(v){
  const e=this;
  let proto=null;
  if(e instanceof HTMLInputElement)proto=HTMLInputElement.prototype;
  else if(e instanceof HTMLTextAreaElement)proto=HTMLTextAreaElement.prototype;
  else if(e instanceof HTMLSelectElement)proto=HTMLSelectElement.prototype;
  e.scrollIntoView({block:'center',inline:'center'});
  if(e.focus)e.focus();
  if(proto){Object.getOwnPropertyDescriptor(proto,'value').set.call(e,v);}
  else if(e.isContentEditable){e.textContent=v;}
  else return false;
  e.dispatchEvent(new Event('input',{bubbles:true}));
  e.dispatchEvent(new Event('change',{bubbles:true}));
  return true;
}`

func (p *Plane) fill(r *http.Request, in fillBody) (any, error) {
	el, err := elementBody{Selector: in.Selector, Ref: in.Ref}.element()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(r.Context(), elementTimeout)
	defer cancel()
	c, s, err := p.session(ctx, str(in.TabID))
	if err != nil {
		return nil, err
	}
	obj, release, err := p.object(ctx, c, s, el)
	defer release()
	if err != nil {
		return nil, err
	}
	var res evalResult
	if err := callOn(ctx, c, s, obj, fillJS, []any{in.Value}, &res); err != nil {
		return nil, err
	}
	if string(res.Result.Value) == "false" {
		return nil, api.NewError(api.ErrUnprocessable, "browser: the element holds no value (not an input, textarea, select or editable element)")
	}
	return nil, nil
}

type uploadBody struct {
	Paths    []string `json:"paths" serde:"required"`
	Selector *string  `json:"selector"`
	Ref      *string  `json:"ref"`
	TabID    *string  `json:"tab_id"`
}

type uploaded struct {
	Files []string `json:"files"`
}

func (p *Plane) upload(r *http.Request, in uploadBody) (uploaded, error) {
	if len(in.Paths) == 0 {
		return uploaded{}, serde.ValueError("paths must name at least one file", "body", "paths")
	}
	for _, f := range in.Paths {
		if !filepath.IsAbs(f) {
			return uploaded{}, serde.ValueError("paths must be absolute: "+f, "body", "paths")
		}
	}
	el, err := elementBody{Selector: in.Selector, Ref: in.Ref}.element()
	if err != nil {
		return uploaded{}, err
	}
	ctx, cancel := context.WithTimeout(r.Context(), elementTimeout)
	defer cancel()
	c, s, err := p.session(ctx, str(in.TabID))
	if err != nil {
		return uploaded{}, err
	}
	params := map[string]any{"files": in.Paths}
	if el.ref != 0 {
		params["backendNodeId"] = el.ref
	} else {
		obj, release, err := p.object(ctx, c, s, el)
		defer release()
		if err != nil {
			return uploaded{}, err
		}
		params["objectId"] = obj
	}
	if err := c.call(ctx, s, "DOM.setFileInputFiles", params, nil); err != nil {
		return uploaded{}, cdpFailed(err)
	}
	return uploaded{Files: in.Paths}, nil
}
