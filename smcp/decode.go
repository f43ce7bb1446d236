package smcp

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
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
func Decode(raw []byte, v any) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil || top == nil {
		if !json.Valid(raw) {
			return NewError(CodeBadRequest, "invalid payload: malformed JSON")
		}
		return NewError(CodeBadRequest, "invalid payload: must be a JSON object")
	}
	if exact := jsonFieldNames(v); exact != nil {
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
