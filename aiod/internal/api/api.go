package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/a2c-smcp/a2c-go/aiod/internal/serde"
)

// Envelope is the body of every JSON route but /health, /mcp, streams and
// binary bodies.
type Envelope struct {
	Success bool    `json:"success"`
	Message string  `json:"message"`
	Data    any     `json:"data"`
	Hint    *string `json:"hint"`
}

// SuccessMessage is the message of a plain success.
const SuccessMessage = "Operation successful"

// JSON writes v as the JSON body with status.
func JSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // serde writes & < > as they are
	_ = enc.Encode(v)
}

// OK answers 200 with data in a successful envelope.
func OK(w http.ResponseWriter, data any) {
	JSON(w, http.StatusOK, Envelope{Success: true, Message: SuccessMessage, Data: data})
}

// OKMessage answers 200 with data and a route's own success message.
func OKMessage(w http.ResponseWriter, msg string, data any) {
	JSON(w, http.StatusOK, Envelope{Success: true, Message: msg, Data: data})
}

// Fail answers status with an unsuccessful envelope; a non-empty hint
// tells the client what to do about it.
func Fail(w http.ResponseWriter, status int, msg string, data any, hint ...string) {
	e := Envelope{Message: msg, Data: data}
	if len(hint) > 0 && hint[0] != "" {
		e.Hint = &hint[0]
	}
	JSON(w, status, e)
}

// validationBody is the 422 answer: the envelope's keys without "hint",
// plus the errors.
type validationBody struct {
	Success bool          `json:"success"`
	Message string        `json:"message"`
	Data    any           `json:"data"`
	Errors  []errorDetail `json:"errors"`
}

type errorDetail struct {
	Location []string `json:"location"`
	Message  string   `json:"message"`
	Type     string   `json:"type"`
}

// ValidationMessage is the message of every 422 answer.
const ValidationMessage = "Request data validation failed"

// Invalid answers 422 with the validation failures.
func Invalid(w http.ResponseWriter, errs ...*serde.Error) {
	b := validationBody{Message: ValidationMessage, Errors: []errorDetail{}}
	for _, e := range errs {
		b.Errors = append(b.Errors, errorDetail{Location: e.Location, Message: e.Message, Type: e.Type})
	}
	JSON(w, http.StatusUnprocessableEntity, b)
}

// InvalidField answers 422 for one body field that decoded but holds a
// value the route refuses (an unknown enum member, say).
func InvalidField(w http.ResponseWriter, field, msg string) {
	Invalid(w, &serde.Error{Location: []string{"body", field}, Message: msg, Type: serde.TypeValue})
}

// MaxJSONBody is the largest JSON request body accepted.
const MaxJSONBody = 2 << 20

// ReadBody reads a JSON request body, answering 413 past MaxJSONBody and
// 415 when it is not declared JSON (see [JSONType]). A missing body
// reads as "{}", as the daemon treats it.
func ReadBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	b, err := readBody(w, r)
	if err != nil {
		WriteError(w, err)
		return nil, false
	}
	return b, true
}

// readBody is ReadBody's reading: an ErrMediaType for a body not
// declared JSON, an ErrTooLarge past MaxJSONBody, an ErrInvalid when the
// body cannot be read.
//
// The media type is what keeps a web page from running a command with a
// "simple" cross-site POST (text/plain, a form), which browsers send
// without asking; the Origin rule refuses those too, this is the second
// wall, and the published API's own (axum's Json extractor answers 415).
// A body without content is no body: "{}" whatever its type, as a
// bodyless POST always was.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	isJSON := JSONType(r.Header.Get("Content-Type"))
	if !isJSON && r.ContentLength > 0 {
		return nil, mediaTypeError()
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxJSONBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, NewError(ErrTooLarge, "Request body too large")
		}
		return nil, NewError(ErrInvalid, "Could not read the request body")
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return []byte("{}"), nil
	}
	if !isJSON { // a body of unknown length (chunked)
		return nil, mediaTypeError()
	}
	return b, nil
}

// MediaTypeMessage is the 415 of a JSON route whose body is not
// declared JSON, in axum's words (the pool's routes say the same).
const MediaTypeMessage = "Expected request with `Content-Type: application/json`"

// mediaTypeError is the 415 of a JSON route.
func mediaTypeError() *Error { return NewError(ErrMediaType, MediaTypeMessage) }

// JSONType reports whether a Content-Type declares JSON as axum's Json
// extractor takes it: application/json or application/*+json, with any
// parameters (charset).
func JSONType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	sub, ok := strings.CutPrefix(mt, "application/")
	return ok && (sub == "json" || strings.HasSuffix(sub, "+json"))
}

// Body reads the request body into the struct v points to (see
// serde.DecodeInto for the tags). On failure it has already answered
// (413 or 422) and returns false.
func Body(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := DecodeBody(w, r, v, nil); err != nil {
		WriteError(w, err)
		return false
	}
	return true
}

// Query decodes the URL query into the struct v points to. On failure it
// has already answered 422 and returns false.
func Query(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := DecodeQuery(r, v); err != nil {
		WriteError(w, err)
		return false
	}
	return true
}

// Reply is an answer as a client decodes it: the envelope with data left
// raw, or the 422 body with its errors. Clients and tests use it.
type Reply struct {
	Success bool            `json:"success"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
	Hint    *string         `json:"hint"`
	Errors  []struct {
		Location []string `json:"location"`
		Message  string   `json:"message"`
		Type     string   `json:"type"`
	} `json:"errors"`
}
