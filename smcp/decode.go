package smcp

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
)

// Decode unmarshals one event payload, raw, into v, which must be a non-nil
// pointer (normally to one of this package's payload structs).
//
// Decode fails with a 400 [*Error] when raw is not a JSON object ("invalid
// payload: must be a JSON object"), is malformed ("invalid payload:
// malformed JSON"), or has a field of the wrong type (for example `invalid
// payload: field "timeout" must be integer`). The message quotes no input
// beyond a short, escaped field path.
//
// Unknown fields are ignored. Unlike encoding/json, a top-level key that
// matches a field of v only when case is ignored ("Timeout" for "timeout")
// is also ignored, so that Go and the protocol's other implementations read
// the same value. Decode does not validate; see [DecodeRequest].
//
// A *PutBlobReq is decoded by [DecodePutBlob]'s single pass, so its Blob
// may share memory with raw.
func Decode(raw []byte, v any) error {
	if r, ok := v.(*PutBlobReq); ok && r != nil {
		// A chunk is mostly its blob: decode it in one pass (see
		// DecodePutBlob) rather than validating and walking it two or
		// three times below.
		return decodePutBlob(raw, r)
	}
	if exact := fieldNames(v); exact != nil {
		if folded, ok := scanKeys(raw, exact); ok && !folded {
			// The common case: an object whose keys need no folding check;
			// one pass of encoding/json decodes (and validates) it.
			if err := json.Unmarshal(raw, v); err != nil {
				return decodeFailure(err)
			}
			return nil
		}
	}
	return decodeSlow(raw, v)
}

// decodeSlow is Decode for input the key scanner could not clear: not an
// object, malformed, or with a key that folds onto a field name.
func decodeSlow(raw []byte, v any) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil || top == nil {
		if !json.Valid(raw) {
			return NewError(CodeBadRequest, "invalid payload: malformed JSON")
		}
		return NewError(CodeBadRequest, "invalid payload: must be a JSON object")
	}
	if exact := fieldNames(v); exact != nil {
		if kept, dropped := dropFoldedKeys(top, exact); dropped {
			raw, _ = json.Marshal(kept) // re-encoding decoded raw values cannot fail
		}
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return decodeFailure(err)
	}
	return nil
}

// DecodeRequest decodes raw into v with [Decode], then validates it.
func DecodeRequest(raw []byte, v Validator) error {
	if err := Decode(raw, v); err != nil {
		return err
	}
	return v.Validate()
}

// decodeFailure maps an encoding/json error to a 400 *Error.
func decodeFailure(err error) *Error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return invalid(escapeShort(te.Field, 64), "must be "+kindName(te.Type))
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return NewError(CodeBadRequest, "invalid payload: malformed JSON")
	}
	var ie *json.InvalidUnmarshalError
	if errors.As(err, &ie) {
		return NewError(CodeInternal, "smcp.Decode: target must be a non-nil pointer")
	}
	return NewError(CodeBadRequest, "invalid payload")
}

func kindName(t reflect.Type) string {
	if t == nil {
		return "of another type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	}
	return "of another type"
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// fieldCache maps a pointer type to its jsonFieldNames result.
var fieldCache sync.Map

// fieldNames is jsonFieldNames, computed once per type.
func fieldNames(v any) map[string]bool {
	t := reflect.TypeOf(v)
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]bool)
	}
	m := jsonFieldNames(v)
	fieldCache.Store(t, m)
	return m
}

// scanKeys walks the top level of a JSON object without decoding it and
// reports whether some key is not one of exact but equals one of them
// under case folding (folded). ok is false when raw is not a well-formed
// object as far as the walk can tell, or a key has escapes; the caller
// then takes the careful path.
func scanKeys(raw []byte, exact map[string]bool) (folded, ok bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return false, false
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return false, skipSpace(raw, i+1) == len(raw)
	}
	for {
		if i >= len(raw) || raw[i] != '"' {
			return false, false
		}
		end := i + 1
		for end < len(raw) && raw[end] != '"' {
			if raw[end] == '\\' {
				return false, false
			}
			end++
		}
		if end >= len(raw) {
			return false, false
		}
		key := raw[i+1 : end]
		if !exact[string(key)] {
			for name := range exact {
				if len(name) == len(key) && strings.EqualFold(name, string(key)) {
					folded = true
				}
			}
		}
		i = skipSpace(raw, end+1)
		if i >= len(raw) || raw[i] != ':' {
			return false, false
		}
		if i = skipValue(raw, skipSpace(raw, i+1)); i < 0 {
			return false, false
		}
		i = skipSpace(raw, i)
		if i >= len(raw) {
			return false, false
		}
		if raw[i] == '}' {
			return folded, skipSpace(raw, i+1) == len(raw)
		}
		if raw[i] != ',' {
			return false, false
		}
		i = skipSpace(raw, i+1)
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just past the JSON value starting at i, or
// -1. It follows strings and nesting only; encoding/json validates later.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				if i = skipString(b, i); i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	default: // a number, true, false or null
		for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && skipSpace(b, i) == i {
			i++
		}
		return i
	}
}

// skipString returns the index just past the string starting at b[i] == '"',
// or -1.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// jsonFieldNames returns the JSON names of the fields of the struct v points
// to. It returns nil, and so leaves folding to encoding/json, when v is not
// a pointer to a struct, when the struct decodes itself, or when it embeds
// another struct.
func jsonFieldNames(v any) map[string]bool {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct ||
		t.Implements(unmarshalerType) {
		return nil
	}
	t = t.Elem()
	names := make(map[string]bool, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous {
			return nil
		}
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		names[name] = true
	}
	return names
}

// dropFoldedKeys removes the keys of top that are not in exact but equal one
// of its names under case folding. It reports whether it removed any.
func dropFoldedKeys(top map[string]json.RawMessage, exact map[string]bool) (map[string]json.RawMessage, bool) {
	dropped := false
	for k := range top {
		if exact[k] {
			continue
		}
		for name := range exact {
			if strings.EqualFold(k, name) {
				delete(top, k)
				dropped = true
				break
			}
		}
	}
	return top, dropped
}
