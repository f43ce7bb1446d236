package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// A node is one value of a decoded document. JSON and YAML both decode to
// nodes, which keep object keys in document order; nothing in this package
// iterates a Go map where order matters.
type node struct {
	kind  kind
	str   string  // a string's value, or a number as JSON text
	num   float64 // a number's value, always finite
	b     bool
	items []*node // array elements
	keys  []string
	vals  []*node // object values, parallel to keys
}

type kind uint8

const (
	kindNull kind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

// describe names k with an article, for "expected ..., got ..." messages.
func (k kind) describe() string {
	switch k {
	case kindNull:
		return "null"
	case kindBool:
		return "a boolean"
	case kindNumber:
		return "a number"
	case kindString:
		return "a string"
	case kindArray:
		return "an array"
	default:
		return "an object"
	}
}

// get returns the value of key in the object n; a missing key and a null
// value both report ok == false.
func (n *node) get(key string) (v *node, ok bool) {
	for i, k := range n.keys {
		if k == key {
			v = n.vals[i]
			return v, v.kind != kindNull
		}
	}
	return nil, false
}

// has reports whether the object n has key, even with a null value.
func (n *node) has(key string) bool {
	for _, k := range n.keys {
		if k == key {
			return true
		}
	}
	return false
}

// Limits on decoded documents, far above any real configuration; they keep
// hostile input (deep nesting, YAML alias bombs) cheap to reject.
const (
	maxNodes = 1 << 17
	maxDepth = 256
)

var errTooLarge = errors.New("document too large")

// builder turns a decoded document into nodes, counting them against
// maxNodes and tracking the path for duplicate-key messages.
type builder struct {
	left int
	path []string
}

func newBuilder() *builder { return &builder{left: maxNodes} }

func (b *builder) alloc(depth int) (*node, error) {
	if depth > maxDepth {
		return nil, errors.New("nesting too deep")
	}
	b.left--
	if b.left < 0 {
		return nil, errTooLarge
	}
	return &node{}, nil
}

// addKey appends key and v to the object n, rejecting a repeated key.
func (b *builder) addKey(n *node, seen map[string]bool, key string, v *node) error {
	if seen[key] {
		p := joinPath(b.path)
		if p != "" {
			p += ": "
		}
		return fmt.Errorf("%sduplicate key %s", p, quote(key))
	}
	seen[key] = true
	n.keys = append(n.keys, key)
	n.vals = append(n.vals, v)
	return nil
}

var utf8BOM = []byte("\xef\xbb\xbf")

// decodeJSON decodes one JSON value, with nothing but white space after it.
func decodeJSON(data []byte) (*node, error) {
	data = bytes.TrimPrefix(data, utf8BOM)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	b := newBuilder()
	n, err := b.jsonValue(dec, 0)
	if err == nil {
		if _, e := dec.Token(); e != io.EOF {
			err = errors.New("unexpected data after the top-level value")
		}
	}
	if err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("line %d: %w", lineOf(data, se.Offset), err)
		}
		if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, errors.New("unexpected end of JSON input")
		}
		return nil, err
	}
	return n, nil
}

func lineOf(data []byte, off int64) int {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	return 1 + bytes.Count(data[:off], []byte("\n"))
}

func (b *builder) jsonValue(dec *json.Decoder, depth int) (*node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	n, err := b.alloc(depth)
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case nil:
		n.kind = kindNull
	case bool:
		n.kind, n.b = kindBool, t
	case string:
		n.kind, n.str = kindString, t
	case json.Number:
		n.kind, n.str = kindNumber, t.String()
		var err error
		if n.num, err = strconv.ParseFloat(n.str, 64); err != nil {
			p := joinPath(b.path)
			if p != "" {
				p += ": "
			}
			return nil, fmt.Errorf("%snumber out of range", p)
		}
	case json.Delim:
		switch t {
		case '[':
			n.kind = kindArray
			for dec.More() {
				b.path = append(b.path, "["+strconv.Itoa(len(n.items))+"]")
				v, err := b.jsonValue(dec, depth+1)
				b.path = b.path[:len(b.path)-1]
				if err != nil {
					return nil, err
				}
				n.items = append(n.items, v)
			}
		case '{':
			n.kind = kindObject
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, _ := kt.(string)
				b.path = append(b.path, pathKey(key))
				v, err := b.jsonValue(dec, depth+1)
				if err == nil {
					b.path = b.path[:len(b.path)-1]
					err = b.addKey(n, seen, key, v)
				}
				if err != nil {
					return nil, err
				}
			}
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
	}
	return n, nil
}

// decodeYAML decodes the single YAML document in data; an empty stream is
// null.
func decodeYAML(data []byte) (n *node, err error) {
	defer func() {
		// The YAML library has panicked on hostile input in the past;
		// report that as a malformed document rather than crash the host.
		if r := recover(); r != nil {
			n, err = nil, errors.New("malformed YAML")
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return &node{kind: kindNull}, nil
		}
		return nil, err
	}
	var next yaml.Node
	if err := dec.Decode(&next); err != io.EOF {
		if err == nil {
			return nil, errors.New("more than one YAML document")
		}
		return nil, err
	}
	return newBuilder().yamlValue(&doc, 0)
}

func (b *builder) yamlValue(y *yaml.Node, depth int) (*node, error) {
	for y.Kind == yaml.DocumentNode || y.Kind == yaml.AliasNode {
		if depth++; depth > maxDepth {
			return nil, errors.New("nesting too deep")
		}
		if y.Kind == yaml.DocumentNode {
			if len(y.Content) == 0 {
				return &node{kind: kindNull}, nil
			}
			y = y.Content[0]
		} else {
			if y.Alias == nil {
				return nil, errors.New("undefined alias")
			}
			y = y.Alias
		}
	}
	n, err := b.alloc(depth)
	if err != nil {
		return nil, err
	}
	switch y.Kind {
	case yaml.ScalarNode:
		return n, yamlScalar(y, n)
	case yaml.SequenceNode:
		n.kind = kindArray
		for i, c := range y.Content {
			b.path = append(b.path, "["+strconv.Itoa(i)+"]")
			v, err := b.yamlValue(c, depth+1)
			b.path = b.path[:len(b.path)-1]
			if err != nil {
				return nil, err
			}
			n.items = append(n.items, v)
		}
		return n, nil
	case yaml.MappingNode:
		n.kind = kindObject
		return n, b.yamlMapping(y, n, depth)
	}
	return nil, fmt.Errorf("line %d: unsupported YAML node", y.Line)
}

// yamlMapping fills the object n from the mapping y. Merge keys ("<<") add
// the keys of the merged mappings that y does not set itself, in order; the
// first merged mapping to set a key wins.
func (b *builder) yamlMapping(y *yaml.Node, n *node, depth int) error {
	if len(y.Content)%2 != 0 {
		return fmt.Errorf("line %d: malformed mapping", y.Line)
	}
	explicit := map[string]bool{}
	for i := 0; i < len(y.Content); i += 2 {
		k := y.Content[i]
		if !isMergeKey(k) {
			key, err := yamlKey(k)
			if err != nil {
				return err
			}
			explicit[key] = true
		}
	}
	seen := map[string]bool{}
	for i := 0; i < len(y.Content); i += 2 {
		k, v := y.Content[i], y.Content[i+1]
		if isMergeKey(k) {
			m, err := b.yamlValue(v, depth+1)
			if err != nil {
				return err
			}
			srcs := []*node{m}
			if m.kind == kindArray {
				srcs = m.items
			}
			for _, src := range srcs {
				if src.kind != kindObject {
					return fmt.Errorf("line %d: a merge key must refer to a mapping", k.Line)
				}
				for j, key := range src.keys {
					if !explicit[key] && !seen[key] {
						seen[key] = true
						n.keys = append(n.keys, key)
						n.vals = append(n.vals, src.vals[j])
					}
				}
			}
			continue
		}
		key, _ := yamlKey(k)
		b.path = append(b.path, pathKey(key))
		val, err := b.yamlValue(v, depth+1)
		if err == nil {
			b.path = b.path[:len(b.path)-1]
			err = b.addKey(n, seen, key, val)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func isMergeKey(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge"
}

// yamlKey returns the text of a mapping key, which must be a scalar.
func yamlKey(k *yaml.Node) (string, error) {
	for i := 0; k.Kind == yaml.AliasNode && k.Alias != nil && i < maxDepth; i++ {
		k = k.Alias
	}
	if k.Kind != yaml.ScalarNode {
		return "", fmt.Errorf("line %d: mapping keys must be scalars", k.Line)
	}
	return k.Value, nil
}

// yamlScalar sets n from the scalar y according to its resolved tag;
// anything but null, booleans and numbers is a string.
func yamlScalar(y *yaml.Node, n *node) error {
	switch y.ShortTag() {
	case "!!null":
		n.kind = kindNull
	case "!!bool":
		if err := y.Decode(&n.b); err != nil {
			return fmt.Errorf("line %d: invalid boolean", y.Line)
		}
		n.kind = kindBool
	case "!!int", "!!float":
		var v any
		if err := y.Decode(&v); err != nil {
			return fmt.Errorf("line %d: invalid number", y.Line)
		}
		n.kind = kindNumber
		switch v := v.(type) {
		case int:
			n.num, n.str = float64(v), strconv.Itoa(v)
		case int64:
			n.num, n.str = float64(v), strconv.FormatInt(v, 10)
		case uint64:
			n.num, n.str = float64(v), strconv.FormatUint(v, 10)
		case float64:
			if math.IsInf(v, 0) || math.IsNaN(v) {
				return fmt.Errorf("line %d: infinite and NaN numbers are not supported", y.Line)
			}
			n.num, n.str = v, strconv.FormatFloat(v, 'g', -1, 64)
		default:
			return fmt.Errorf("line %d: invalid number", y.Line)
		}
	default:
		n.kind, n.str = kindString, y.Value
	}
	return nil
}

// appendJSON appends n to dst as JSON, keeping object key order.
func appendJSON(dst []byte, n *node) []byte {
	switch n.kind {
	case kindNull:
		return append(dst, "null"...)
	case kindBool:
		return strconv.AppendBool(dst, n.b)
	case kindNumber:
		return append(dst, n.str...)
	case kindString:
		return appendJSONString(dst, n.str)
	case kindArray:
		dst = append(dst, '[')
		for i, v := range n.items {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSON(dst, v)
		}
		return append(dst, ']')
	default:
		dst = append(dst, '{')
		for i, k := range n.keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, k)
			dst = append(dst, ':')
			dst = appendJSON(dst, n.vals[i])
		}
		return append(dst, '}')
	}
}

// appendJSONString appends s as a JSON string. Unlike encoding/json it
// leaves '<', '>' and '&' alone, so URLs stay readable; invalid UTF-8
// becomes U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c < 0x20 || c == 0x7f:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, `\u202`...)
			dst = append(dst, hex[r&0xf])
		default:
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

// toAny converts n to the value encoding/json would decode it to.
func toAny(n *node) any {
	switch n.kind {
	case kindNull:
		return nil
	case kindBool:
		return n.b
	case kindNumber:
		return n.num
	case kindString:
		return n.str
	case kindArray:
		out := make([]any, len(n.items))
		for i, v := range n.items {
			out[i] = toAny(v)
		}
		return out
	default:
		out := make(map[string]any, len(n.keys))
		for i, k := range n.keys {
			out[k] = toAny(n.vals[i])
		}
		return out
	}
}

// joinPath joins field path segments: names with '.', except that a
// segment starting with '[' (an index or a quoted key) is appended as is.
func joinPath(segs []string) string {
	var b strings.Builder
	for _, s := range segs {
		if b.Len() > 0 && !strings.HasPrefix(s, "[") {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	return b.String()
}

// pathKey returns key as a path segment: as is when it is a plain name,
// else as a quoted index.
func pathKey(key string) string {
	if key == "" {
		return `[""]`
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return "[" + quote(key) + "]"
		}
	}
	return key
}
