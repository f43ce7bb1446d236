package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/a2c-smcp/a2c-go/sandbox/serde"
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

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// OK answers 200 with data in a successful envelope.
func OK(w http.ResponseWriter, data any) {
	writeJSON(w, http.StatusOK, Envelope{Success: true, Message: SuccessMessage, Data: data})
}

// Fail answers status with an unsuccessful envelope; hint may be nil.
func Fail(w http.ResponseWriter, status int, msg string, data any, hint ...string) {
	e := Envelope{Message: msg, Data: data}
	if len(hint) > 0 && hint[0] != "" {
		e.Hint = &hint[0]
	}
	writeJSON(w, status, e)
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

// Invalid answers 422 with the validation failures.
func Invalid(w http.ResponseWriter, errs ...*serde.Error) {
	b := validationBody{Message: "Request data validation failed", Errors: []errorDetail{}}
	for _, e := range errs {
		b.Errors = append(b.Errors, errorDetail{Location: e.Location, Message: e.Message, Type: e.Type})
	}
	writeJSON(w, http.StatusUnprocessableEntity, b)
}

// MaxJSONBody is the largest JSON request body accepted.
const MaxJSONBody = 2 << 20

// ReadBody reads a JSON request body, answering 413 past MaxJSONBody. A
// missing body reads as "{}", as the daemon treats it.
func ReadBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxJSONBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			Fail(w, http.StatusRequestEntityTooLarge, "Request body too large", nil)
		} else {
			Fail(w, http.StatusBadRequest, "Could not read the request body", nil)
		}
		return nil, false
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		b = []byte("{}")
	}
	return b, true
}

// limitJSON refuses a JSON body whose declared length is over the limit
// before a handler reads it.
func limitJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > MaxJSONBody && strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			Fail(w, http.StatusRequestEntityTooLarge, "Request body too large", nil)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// envelopeErrors turns the mux's own plain-text 404 and 405 answers into
// envelopes.
func envelopeErrors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&muxErrorWriter{ResponseWriter: w}, r)
	})
}

type muxErrorWriter struct {
	http.ResponseWriter
	swallow bool
}

func (m *muxErrorWriter) WriteHeader(code int) {
	if (code == http.StatusNotFound || code == http.StatusMethodNotAllowed) &&
		strings.HasPrefix(m.Header().Get("Content-Type"), "text/plain") {
		m.swallow = true
		m.Header().Del("X-Content-Type-Options")
		msg := "Not Found"
		if code == http.StatusMethodNotAllowed {
			msg = "Method Not Allowed"
		}
		Fail(m.ResponseWriter, code, msg, nil)
		return
	}
	m.ResponseWriter.WriteHeader(code)
}

func (m *muxErrorWriter) Write(b []byte) (int, error) {
	if m.swallow {
		return len(b), nil
	}
	return m.ResponseWriter.Write(b)
}

func (m *muxErrorWriter) Unwrap() http.ResponseWriter { return m.ResponseWriter }

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
