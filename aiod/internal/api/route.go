package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/a2c-smcp/a2c-go/aiod/internal/serde"
)

// Check is a body check serde's decoder has no model for (unknown
// fields of a deny_unknown_fields struct, a list's element type): it
// gets the body and the decoder's verdict and returns the error to
// answer, if any.
type Check func(body []byte, err *serde.Error) *serde.Error

// Source is where a [Route] reads its input.
type Source int

const (
	// FromBody decodes the JSON body (a missing body reads as {}).
	FromBody Source = iota
	// FromQuery decodes the URL query.
	FromQuery
	// FromNothing reads no input; the route sees In's zero value.
	FromNothing
)

// Route declares one JSON route of a plane as data: where its input In
// comes from, the operation, and how the result Out and the refusals are
// answered. It is an http.Handler:
//
//	mux.Handle("GET /v2/fs/stat", api.Route[StatRequest, *Stat]{From: api.FromQuery, Op: stat})
//
// The order of an answer is fixed: the input is decoded (a failure is a
// 413 or the 422 validation body, never overridden, since it is the
// HTTP layer's and not the plane's), then Op runs; its error is answered
// by [WriteError] with the route's Overrides, its result by Reply (the
// envelope with Op's result as data when Reply is nil).
type Route[In, Out any] struct {
	// From is where In is decoded from (FromBody by default).
	From Source
	// Check adds body checks to serde's (FromBody only).
	Check Check
	// Decode, when set, replaces the decoding above: a multipart body,
	// a query plus a body. An error it returns is answered as a decoding
	// failure: a *serde.Error as the 422 body, an [*Error] by its kind.
	Decode func(w http.ResponseWriter, r *http.Request, in *In) error
	// Op runs the route; path values are on r.
	Op func(r *http.Request, in In) (Out, error)
	// Reply answers a success (a stream, a custom message); nil answers
	// [OK] with out as data.
	Reply func(w http.ResponseWriter, r *http.Request, out Out)
	// Fail, when set, answers a refusal of Op in the route's own form (a
	// download's bare status); nil answers [WriteError] with Override.
	Fail func(w http.ResponseWriter, r *http.Request, err error)
	// Override holds the route's exceptions to the status table.
	Override []Override
	// Log receives the refusals that are the daemon's fault, those whose
	// kind is 5xx by the table whatever the route answers (default:
	// discarded).
	Log *slog.Logger
}

// ServeHTTP decodes, runs and answers; see [Route].
func (rt Route[In, Out]) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var in In
	if err := rt.decode(w, r, &in); err != nil {
		WriteError(w, err)
		return
	}
	out, err := rt.Op(r, in)
	switch {
	case err == nil && rt.Reply != nil:
		rt.Reply(w, r, out)
	case err == nil:
		OK(w, out)
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// the client left; nobody reads an answer
	default:
		if status := Status(err); status >= 500 && rt.Log != nil {
			rt.Log.Warn("request failed", "route", r.Pattern, "status", status, "error", err.Error())
		}
		if rt.Fail != nil {
			rt.Fail(w, r, err)
			return
		}
		WriteError(w, err, rt.Override...)
	}
}

func (rt Route[In, Out]) decode(w http.ResponseWriter, r *http.Request, in *In) error {
	switch {
	case rt.Decode != nil:
		return rt.Decode(w, r, in)
	case rt.From == FromQuery:
		return DecodeQuery(r, in)
	case rt.From == FromBody:
		return DecodeBody(w, r, in, rt.Check)
	}
	return nil
}

// DecodeBody reads the JSON body (see [ReadBody]) into the struct v
// points to with serde's rules plus c (nil: none). Its errors: an
// ErrTooLarge or ErrInvalid [*Error] when the body cannot be read, a
// *serde.Error when it does not decode.
func DecodeBody(w http.ResponseWriter, r *http.Request, v any, c Check) error {
	b, err := readBody(w, r)
	if err != nil {
		return err
	}
	serr := serde.DecodeInto(b, v)
	if c != nil {
		serr = c(b, serr)
	}
	if serr != nil {
		return serr
	}
	return nil
}

// DecodeQuery decodes the URL query into the struct v points to; its
// error is a *serde.Error.
func DecodeQuery(r *http.Request, v any) error {
	if err := serde.DecodeQueryInto(r.URL.RawQuery, v); err != nil {
		return err
	}
	return nil
}
