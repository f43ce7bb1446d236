package serde

import (
	"fmt"
	"strings"
)

// Error is one validation failure in aiod's 422 shape.
type Error struct {
	Location []string // e.g. ["body","command"], ["query","path"], ["query"]
	Message  string   // serde text
	Type     string   // "value_error.missing", "type_error", "value_error.jsondecode", "value_error"
}

func (e *Error) Error() string { return fmt.Sprintf("%v: %s (%s)", e.Location, e.Message, e.Type) }

// Error types.
const (
	TypeMissing    = "value_error.missing"
	TypeType       = "type_error"
	TypeJSONDecode = "value_error.jsondecode"
	TypeValue      = "value_error"
)

// Kind is the Rust type a field is declared with.
type Kind int

const (
	String     Kind = iota // String            → Go string
	U64                    // u64               → uint64
	I64                    // i64               → int64
	U32                    // u32               → uint32
	Bool                   // bool              → bool
	F64                    // f64               → float64
	StringList             // Vec<String>       → []string
	StringMap              // HashMap<String,String> → map[string]string
	Any                    // serde_json::Value → json.RawMessage (raw bytes of the value)
	Object                 // serde_json::Map<String,Value> → json.RawMessage (raw bytes of the object)
)

var kindNames = [...]string{"String", "U64", "I64", "U32", "Bool", "F64", "StringList", "StringMap", "Any", "Object"}

func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// expecting is serde's Visitor::expecting text for the kind.
func (k Kind) expecting() string {
	switch k {
	case String:
		return "a string"
	case U64:
		return "u64"
	case I64:
		return "i64"
	case U32:
		return "u32"
	case Bool:
		return "a boolean"
	case F64:
		return "f64"
	case StringList:
		return "a sequence"
	case StringMap, Object:
		return "a map"
	default:
		return "any valid JSON value"
	}
}

// Field describes one expected field. Required means a plain Rust type
// (missing → "missing field", null → invalid type); otherwise the field is an
// Option<T> (missing or null → absent from the result).
type Field struct {
	Name     string
	Kind     Kind
	Required bool
	// Variants, for a String field, are the values of a unit-variant
	// enum: any other string is serde's "unknown variant" error, at the
	// position after the string.
	Variants []string
}

// unknownVariant is serde's message for a string no variant matches.
func unknownVariant(v string, variants []string) string {
	want := "one of `" + strings.Join(variants, "`, `") + "`"
	switch len(variants) {
	case 1:
		want = "`" + variants[0] + "`"
	case 2:
		want = "`" + variants[0] + "` or `" + variants[1] + "`"
	}
	return "unknown variant `" + v + "`, expected " + want
}
