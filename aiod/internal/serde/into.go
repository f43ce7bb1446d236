package serde

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

var rawType = reflect.TypeOf(json.RawMessage(nil))

// FieldsOf derives Fields from a struct type: the name comes from the
// `json:"name"` tag (fields tagged "-" or unexported are skipped), the kind
// from the Go type (string, uint64, int64, uint32, bool, float64, []string,
// map[string]string, json.RawMessage = Any; a pointer makes no difference),
// `serde:"required"` marks a required field and `serde:"enum=a|b"` a string
// that must be one of the variants (both may be given, comma-separated).
func FieldsOf(t reflect.Type) ([]Field, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("serde: %v is not a struct", t)
	}
	var fs []Field
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		name, ok := jsonName(sf)
		if !ok {
			continue
		}
		k, ok := kindOf(sf.Type)
		if !ok {
			return nil, fmt.Errorf("serde: field %s has unsupported type %v", sf.Name, sf.Type)
		}
		f := Field{Name: name, Kind: k}
		for _, opt := range strings.Split(sf.Tag.Get("serde"), ",") {
			switch {
			case opt == "required":
				f.Required = true
			case strings.HasPrefix(opt, "enum="):
				f.Variants = strings.Split(strings.TrimPrefix(opt, "enum="), "|")
			}
		}
		fs = append(fs, f)
	}
	return fs, nil
}

func kindOf(t reflect.Type) (Kind, bool) {
	if t == rawType {
		return Any, true
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return String, true
	case reflect.Uint64:
		return U64, true
	case reflect.Int64:
		return I64, true
	case reflect.Uint32:
		return U32, true
	case reflect.Bool:
		return Bool, true
	case reflect.Float64:
		return F64, true
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			return StringList, true
		}
	case reflect.Map:
		if t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.String {
			return StringMap, true
		}
	}
	return 0, false
}

// DecodeInto decodes body into the struct pointed to by v with Decode's
// semantics; v's Go type name is used as the Rust struct name. Absent or
// null optional fields leave the Go field untouched. It panics if v's type
// is not supported (a programming error).
func DecodeInto(body []byte, v any) *Error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		panic("serde: DecodeInto needs a pointer to a struct")
	}
	fs, err := FieldsOf(rv.Type())
	if err != nil {
		panic(err)
	}
	vals, serr := DecodeNamed(rv.Elem().Type().Name(), body, fs)
	if serr != nil {
		return serr
	}
	assign(rv.Elem(), vals)
	return nil
}

// DecodeQueryInto is DecodeRawQuery into a struct, like DecodeInto.
func DecodeQueryInto(rawQuery string, v any) *Error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		panic("serde: DecodeQueryInto needs a pointer to a struct")
	}
	fs, err := FieldsOf(rv.Type())
	if err != nil {
		panic(err)
	}
	vals, serr := DecodeRawQuery(rawQuery, fs)
	if serr != nil {
		return serr
	}
	assign(rv.Elem(), vals)
	return nil
}

func assign(s reflect.Value, vals map[string]any) {
	t := s.Type()
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		name, ok := jsonName(sf)
		if !ok {
			continue
		}
		val, ok := vals[name]
		if !ok {
			continue
		}
		fv := s.Field(i)
		x := reflect.ValueOf(val)
		if fv.Kind() == reflect.Pointer && sf.Type != rawType {
			p := reflect.New(sf.Type.Elem())
			p.Elem().Set(x.Convert(sf.Type.Elem()))
			fv.Set(p)
		} else {
			fv.Set(x.Convert(sf.Type))
		}
	}
}

// jsonName is the field's name on the wire (its json tag, or its Go name),
// and false for fields that are not decoded.
func jsonName(sf reflect.StructField) (string, bool) {
	name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
	if !sf.IsExported() || name == "-" {
		return "", false
	}
	if name == "" {
		name = sf.Name
	}
	return name, true
}
