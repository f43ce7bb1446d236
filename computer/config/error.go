package config

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Error is a configuration problem that stopped [Load], [Parse] or
// [Resolver.Render]. It never holds a secret: values are named by their
// place in the file, never quoted, except for identifiers such as server
// names, keys, bundle_ids, input ids and type labels.
type Error struct {
	// File is the name given to Parse, or the path given to Load. It is
	// empty for errors of Render.
	File string
	// Server identifies the server: its key in a "servers" object, else its
	// name. It is empty when the server has neither (Index then tells which
	// one), and for problems outside any server. For Render it is the
	// bundle_id.
	Server string
	// Index is the position of the server in the file, counting from 0, or
	// -1 for problems outside any server and for errors of Render.
	Index int
	// Field is the path of the offending field, such as
	// "server_parameters.env.API_KEY" or "inputs[2].options"; it may be empty.
	Field string
	// Input is the id of the input concerned, for errors of Render that
	// an input caused (see [Error.Category]); else empty.
	Input string
	// Message says what is wrong with the field.
	Message string
	// Err is the underlying cause, if any; Unwrap returns it.
	Err error
}

// Error formats e as "file: server "name": field: message: cause", leaving
// out the empty parts.
func (e *Error) Error() string {
	var parts []string
	if e.File != "" {
		parts = append(parts, e.File)
	}
	switch {
	case e.Server != "":
		parts = append(parts, "server "+quote(e.Server))
	case e.Index >= 0:
		parts = append(parts, "server #"+strconv.Itoa(e.Index))
	}
	if e.Field != "" {
		parts = append(parts, e.Field)
	}
	if e.Message != "" {
		parts = append(parts, e.Message)
	}
	if e.Err != nil {
		parts = append(parts, e.Err.Error())
	}
	return strings.Join(parts, ": ")
}

// Unwrap returns e.Err.
func (e *Error) Unwrap() error { return e.Err }

// Error categories of the runtime contract (§6), as [Error.Category]
// reports them.
const (
	// CategoryValidation: the configuration is not valid; fix the file.
	CategoryValidation = "validation"
	// CategoryMissingInput: an input has no value (0.3.1).
	CategoryMissingInput = "missing_input"
	// CategoryInvalidSelection: a pickString's stored value matches no
	// option value (0.3.2).
	CategoryInvalidSelection = "invalid_selection"
)

// Category returns the runtime contract's error category of e:
// [CategoryInvalidSelection] when it wraps [ErrInvalidSelection],
// [CategoryMissingInput] when it wraps [ErrNoValue] or [ErrUnknownInput],
// else [CategoryValidation].
func (e *Error) Category() string {
	switch {
	case errors.Is(e, ErrInvalidSelection):
		return CategoryInvalidSelection
	case errors.Is(e, ErrNoValue), errors.Is(e, ErrUnknownInput):
		return CategoryMissingInput
	}
	return CategoryValidation
}

// Errors wrapped by the [*Error] values of [Resolver.Render]; test for them
// with [errors.Is].
var (
	// ErrUnknownInput reports an ${input:ID} placeholder whose ID the
	// Resolver does not declare.
	ErrUnknownInput = errors.New("unknown input")
	// ErrNoValue reports an input or environment variable that has no value.
	ErrNoValue = errors.New("no value")
	// ErrInvalidSelection reports a pickString value, from the
	// environment, the user's stored answer or the prompt, that is the value
	// of none of its options. The input's default and first option are not
	// used in its place: a selection that no longer exists is an error, not
	// a silent change (0.3.2, runtime contract §5.12). The *Error's Input
	// names the input; its Category is "invalid_selection".
	ErrInvalidSelection = errors.New("invalid_selection")
	// ErrBadValue is the former name of [ErrInvalidSelection].
	//
	// Deprecated: use ErrInvalidSelection.
	ErrBadValue = ErrInvalidSelection
	// ErrNoPrompt, wrapped in the error of [Resolver.Prompt], says that
	// there is nobody to ask (no terminal): the input then takes its
	// default, as if the question had been answered with nothing. Any other
	// error of Prompt fails the rendering.
	ErrNoPrompt = errors.New("nobody to ask")
)

// Diagnostic is a local configuration problem that did not stop loading,
// such as a duplicate bundle_id. Diagnostics are for the Computer's own
// logs and user interface; they are never protocol errors, and they never
// hold a secret.
type Diagnostic struct {
	// Server is the bundle_id of the server concerned or, before one is
	// known, its key or name.
	Server string
	// Field is the path of the field concerned, such as "bundle_id"; it may
	// be empty.
	Field string
	// Message describes the problem and its consequence.
	Message string
}

// String formats d as "server "id": field: message".
func (d Diagnostic) String() string {
	var b strings.Builder
	if d.Server != "" {
		b.WriteString("server ")
		b.WriteString(quote(d.Server))
		b.WriteString(": ")
	}
	if d.Field != "" {
		b.WriteString(d.Field)
		b.WriteString(": ")
	}
	b.WriteString(d.Message)
	return b.String()
}

// maxQuoted bounds the bytes of an identifier quoted in a message.
const maxQuoted = 64

// quote returns s as a Go string literal with non-ASCII escaped, cut to
// maxQuoted bytes (on a rune boundary) with "..." appended when cut.
func quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.QuoteToASCII(s)
	}
	cut := maxQuoted
	for i := maxQuoted; i > maxQuoted-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			cut = i
			break
		}
	}
	return strconv.QuoteToASCII(s[:cut]) + "..."
}
