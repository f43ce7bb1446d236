package serde

import (
	"fmt"
	"slices"
)

// DefaultStructName is the Rust struct name Decode uses in the few messages
// that name the struct ("expected struct Request", "invalid length 0,
// expected struct Request with 2 elements"). Use DecodeNamed to set it.
const DefaultStructName = "Request"

// Decode parses body (a JSON object) against fields the way
// serde_json::from_slice::<T> does for a #[derive(Deserialize)] struct T,
// and returns the values (name → string, uint64, int64, uint32, bool,
// float64, []string, map[string]string or json.RawMessage) or the first
// error as serde reports it. Optional fields that are absent or null are
// absent from the map.
func Decode(body []byte, fields []Field) (map[string]any, *Error) {
	return DecodeNamed(DefaultStructName, body, fields)
}

// DecodeNamed is Decode for a struct with the given Rust name.
func DecodeNamed(name string, body []byte, fields []Field) (map[string]any, *Error) {
	d := newDec(body)
	vals, err := d.structValue(name, fields)
	if err == nil {
		// Deserializer::end
		if _, ok := d.ws(); ok {
			err = d.peekSyntax(msgTrailingChars)
		}
	}
	if err != nil {
		return nil, bodyError(err)
	}
	return vals, nil
}

func bodyError(e *serr) *Error {
	loc := []string{"body"}
	if e.field != "" {
		loc = append(loc, e.field)
	}
	return &Error{Location: loc, Message: e.text(), Type: errType(e.cat)}
}

func errType(c category) string {
	switch c {
	case catType:
		return TypeType
	case catValue, catDuplicate:
		return TypeValue
	case catMissing:
		return TypeMissing
	}
	return TypeJSONDecode
}

// structValue is deserialize_struct.
func (d *dec) structValue(name string, fields []Field) (map[string]any, *serr) {
	c, ok := d.ws()
	if !ok {
		return nil, d.peekSyntax(msgEOFValue)
	}
	vals := map[string]any{}
	switch c {
	case '{':
		err := d.container('{', func() *serr { return d.visitStructMap(fields, vals) })
		return vals, err
	case '[':
		err := d.container('[', func() *serr { return d.visitStructSeq(name, fields, vals) })
		return vals, err
	}
	return nil, d.peekInvalidType("struct " + name)
}

func (d *dec) visitStructMap(fields []Field, vals map[string]any) *serr {
	index := make(map[string]int, len(fields))
	for i := len(fields) - 1; i >= 0; i-- {
		index[fields[i].Name] = i
	}
	seen := make([]bool, len(fields))
	first := true
	for {
		more, err := d.hasNextKey(&first)
		if err != nil {
			return err
		}
		if !more {
			break
		}
		key, err := d.readKey()
		if err != nil {
			return err
		}
		i, known := index[key]
		if known && seen[i] {
			e := custom(fmt.Sprintf("duplicate field `%s`", key), catDuplicate)
			e.field = key
			return e
		}
		if err := d.objectColon(); err != nil {
			return err
		}
		if !known {
			if err := d.ignoreValue(); err != nil {
				return err
			}
			continue
		}
		seen[i] = true
		if err := d.field(fields[i], vals); err != nil {
			return err
		}
	}
	for i, f := range fields {
		if f.Required && !seen[i] {
			e := custom(fmt.Sprintf("missing field `%s`", f.Name), catMissing)
			e.field = f.Name
			return e
		}
	}
	return nil
}

func (d *dec) visitStructSeq(name string, fields []Field, vals map[string]any) *serr {
	first := true
	for i, f := range fields {
		more, err := d.hasNextElement(&first)
		if err != nil {
			return err
		}
		if !more {
			s := "s"
			if len(fields) == 1 {
				s = ""
			}
			return custom(fmt.Sprintf("invalid length %d, expected struct %s with %d element%s", i, name, len(fields), s), catValue)
		}
		if err := d.field(f, vals); err != nil {
			return err
		}
	}
	return nil
}

// field reads one field value into vals (Option<T>: null → absent).
func (d *dec) field(f Field, vals map[string]any) *serr {
	if !f.Required {
		if c, ok := d.ws(); ok && c == 'n' {
			d.i++
			return d.parseIdent("ull")
		}
	}
	var v any
	var err *serr
	switch f.Kind {
	case String:
		var str string
		if str, err = d.readString(); err == nil && len(f.Variants) > 0 && !slices.Contains(f.Variants, str) {
			err = d.fix(custom(unknownVariant(str, f.Variants), catValue))
		}
		v = str
	case U64, I64, U32, F64:
		v, err = d.readNumber(f.Kind)
	case Bool:
		v, err = d.readBool()
	case StringList:
		v, err = d.readStringList()
	case StringMap:
		v, err = d.readStringMap()
	case Object:
		v, err = d.readObject()
	default:
		v, err = d.readAny()
	}
	if err != nil {
		if err.cat != catSyntax && err.field == "" {
			err.field = f.Name
		}
		return err
	}
	vals[f.Name] = v
	return nil
}
