package files

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
	"github.com/a2c-smcp/a2c-go/aiod/internal/fserr"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
	"github.com/a2c-smcp/a2c-go/aiod/internal/serde"
)

// Config configures a [Plane] and its [Engine].
type Config struct {
	// Sandbox is the isolation in force: every path resolves in its view and every access is checked as its account (nil: the host's view, as the daemon).
	Sandbox *sandbox.Sandbox
	// Workspace is where relative paths resolve (default: the current
	// directory).
	Workspace string
	// DefaultUser owns created objects when a request names no one
	// (AIO_DEFAULT_USER); empty means the daemon's own account.
	DefaultUser string
	// Logger receives failures worth an operator's attention (default:
	// discard).
	Logger *slog.Logger
}

// Plane serves the files routes over one [Engine].
type Plane struct {
	e   *Engine
	log *slog.Logger
}

// New returns a plane ready to [Plane.Mount].
func New(cfg Config) *Plane {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Plane{e: NewEngine(cfg), log: cfg.Logger}
}

// Engine is the engine behind the routes, for other callers (MCP tools).
func (p *Plane) Engine() *Engine { return p.e }

// Close releases what the plane holds (the undo history). It never
// blocks.
func (p *Plane) Close(context.Context) error {
	p.e.hist.mu.Lock()
	defer p.e.hist.mu.Unlock()
	clear(p.e.hist.m)
	return nil
}

// Mount registers the /v2/fs and /v1/file routes (upload, download and
// tree excepted) on mux.
func (p *Plane) Mount(mux *http.ServeMux) {
	e := p.e
	mux.Handle("GET /v2/fs/read", v2(p, true, nil, e.Read))
	mux.Handle("POST /v2/fs/write", v2(p, false, writeCheckV2, e.Write))
	mux.Handle("POST /v2/fs/edit", v2(p, false, nil, e.editV2))
	mux.Handle("GET /v2/fs/stat", v2(p, true, nil, e.Stat))
	mux.Handle("GET /v2/fs/list", v2(p, true, nil, e.List))
	mux.Handle("GET /v2/fs/search", v2(p, true, nil, e.Find))
	mux.Handle("POST /v2/fs/grep", v2(p, false, nil, e.Grep))
	mux.Handle("POST /v2/fs/mkdir", v2(p, false, nil, e.Mkdir))
	mux.Handle("POST /v2/fs/copy", v2(p, false, nil, e.Copy))
	mux.Handle("POST /v2/fs/move", v2(p, false, nil, e.Move))
	mux.Handle("POST /v2/fs/delete", v2(p, false, nil, e.Delete))

	mux.Handle("POST /v1/file/read", v1(p, nil, FileReadRequest.engine, e.Read))
	mux.Handle("POST /v1/file/write", v1(p, writeCheckV1, FileWriteRequest.engine, e.Write))
	mux.Handle("POST /v1/file/replace", v1(p, nil, same[FileReplaceRequest], e.Replace))
	mux.Handle("POST /v1/file/search", v1(p, nil, same[FileSearchRequest], e.SearchFile))
	mux.Handle("POST /v1/file/find", v1(p, nil, FileFindRequest.engine, e.Find))
	mux.Handle("POST /v1/file/glob", v1(p, nil, same[FileGlobRequest], e.Glob))
	mux.Handle("POST /v1/file/grep", v1(p, nil, same[FileGrepRequest], e.Grep))
	mux.Handle("POST /v1/file/list", v1(p, nil, FileListRequest.engine, e.List))
	mux.Handle("POST /v1/file/str_replace_editor", v1(p, viewRangeCheck, StrReplaceEditorRequest.engine, e.Edit))
	mux.Handle("POST /v1/file/stat", v1(p, nil, FileStatRequest.engine, e.Stat))
	mux.Handle("POST /v1/file/mkdir", v1(p, nil, same[FileMkdirRequest], e.Mkdir))
	mux.Handle("POST /v1/file/copy", v1(p, nil, same[FileCopyRequest], e.Copy))
	mux.Handle("POST /v1/file/move", v1(p, nil, same[FileMoveRequest], e.Move))
	mux.Handle("POST /v1/file/delete", v1(p, nil, same[FileDeleteRequest], e.Delete))
}

// editV2 is Edit without the commands v2 serves on other routes.
func (e *Engine) editV2(ctx context.Context, req FsEditRequest) (*StrReplaceEditorResult, *fserr.Error) {
	switch req.Command {
	case CmdView:
		return nil, fserr.New("edit", req.Path, fserr.BadRequest, "command `view` is not supported on POST /v2/fs/edit; use GET /v2/fs/read")
	case CmdCreate:
		return nil, fserr.New("edit", req.Path, fserr.BadRequest, "command `create` is not supported on POST /v2/fs/edit; use POST /v2/fs/write")
	}
	return e.Edit(ctx, req)
}

// userQuery is the ?user= every v2 files route takes.
type userQuery struct {
	User string `json:"user"`
}

// ownable is a request with an Ownership to set.
type ownable[T any] interface {
	*T
	setUser(string)
}

// engineOp is an engine operation as a route runs it.
type engineOp[T, R any] func(context.Context, T) (R, *fserr.Error)

// run calls op, returning a nil error (not a nil *fserr.Error) on success.
func (op engineOp[T, R]) run(r *http.Request, in T) (R, error) {
	res, ferr := op(r.Context(), in)
	if ferr != nil {
		return res, ferr
	}
	return res, nil
}

// v2 is a /v2/fs route whose wire form is the engine's request, in the
// query (query) or the body, with the owner from ?user= (decoded first,
// as the daemon does). File errors answer with their type's status.
func v2[T any, PT ownable[T], R any](p *Plane, query bool, c api.Check, op engineOp[T, R]) http.Handler {
	return api.Route[T, R]{
		Decode: func(w http.ResponseWriter, r *http.Request, in *T) error {
			var uq userQuery
			if err := api.DecodeQuery(r, &uq); err != nil {
				return err
			}
			PT(in).setUser(uq.User)
			if query {
				return api.DecodeQuery(r, in)
			}
			return api.DecodeBody(w, r, in, c)
		},
		Op:  op.run,
		Log: p.log,
	}
}

// v1 is a /v1/file route: a JSON body adapted to the engine's request;
// file errors answer 200 with success false.
func v1[W, T, R any](p *Plane, c api.Check, adapt func(W) T, op engineOp[T, R]) http.Handler {
	return api.Route[W, R]{
		Check:    c,
		Op:       func(r *http.Request, in W) (R, error) { return op.run(r, adapt(in)) },
		Override: []api.Override{fserr.Failed200},
		Log:      p.log,
	}
}

// same is the adapter of a v1 route whose body is the engine's request.
func same[T any](in T) T { return in }

// member is one top-level member of a JSON object body: its key, the
// offsets just past the key and past the value, and the value.
type member struct {
	key            string
	keyEnd, valEnd int
	val            json.RawMessage
}

// members lists a body's top-level members; false when it is not a
// well-formed object.
func members(body []byte) ([]member, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	var ms []member
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		m := member{key: fmt.Sprint(t), keyEnd: int(dec.InputOffset())}
		if err := dec.Decode(&m.val); err != nil {
			return nil, false
		}
		m.valEnd = int(dec.InputOffset())
		ms = append(ms, m)
	}
	return ms, true
}

// serdeAt is serde's " at line L column C" for the byte offset just past
// what it had read.
func serdeAt(body []byte, off int) string {
	start := bytes.LastIndexByte(body[:off], '\n') + 1
	return fmt.Sprintf(" at line %d column %d", 1+bytes.Count(body[:start], []byte{'\n'}), off-start)
}

var serdePos = regexp.MustCompile(` at line (\d+) column (\d+)$`)

// before reports whether offset off in body comes before err's position
// (an error without one, a missing field, comes last).
func before(body []byte, off int, err *serde.Error) bool {
	if err == nil {
		return true
	}
	m := serdePos.FindStringSubmatch(err.Message)
	if m == nil {
		return true
	}
	line, _ := strconv.Atoi(m[1])
	col, _ := strconv.Atoi(m[2])
	start := bytes.LastIndexByte(body[:off], '\n') + 1
	l := 1 + bytes.Count(body[:start], []byte{'\n'})
	return l < line || l == line && off-start < col
}

// oneOf is serde's list of expected names.
func oneOf(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "`" + n + "`"
	}
	switch len(q) {
	case 1:
		return q[0]
	case 2:
		return q[0] + " or " + q[1]
	}
	return "one of " + strings.Join(q, ", ")
}

// serdeChecks builds a check refusing unknown top-level fields (when
// known is non-nil, as #[serde(deny_unknown_fields)] does) and unknown
// variants of the enum fields, reporting whichever serde meets first.
func serdeChecks(known []string, enums map[string][]string) api.Check {
	return func(body []byte, err *serde.Error) *serde.Error {
		ms, ok := members(body)
		if !ok {
			return err
		}
		for _, m := range ms {
			var found *serde.Error
			var off int
			if known != nil && !slices.Contains(known, m.key) {
				off = m.keyEnd
				found = &serde.Error{Location: []string{"body"}, Type: serde.TypeValue,
					Message: fmt.Sprintf("unknown field `%s`, expected %s", m.key, oneOf(known))}
			} else if variants, isEnum := enums[m.key]; isEnum {
				var s string
				if json.Unmarshal(m.val, &s) == nil && !slices.Contains(variants, s) {
					off = m.valEnd
					found = &serde.Error{Location: []string{"body", m.key}, Type: serde.TypeValue,
						Message: fmt.Sprintf("unknown variant `%s`, expected %s", s, oneOf(variants))}
				}
			}
			if found != nil && before(body, off, err) {
				found.Message += serdeAt(body, off)
				return found
			}
		}
		return err
	}
}

var (
	encodingEnum = map[string][]string{"encoding": Encodings}
	writeCheckV2 = serdeChecks([]string{"path", "content", "encoding", "append", "leading_newline", "trailing_newline"}, encodingEnum)
	writeCheckV1 = serdeChecks(nil, encodingEnum)
)

// viewRangeCheck validates v1's view_range, a list of integers.
func viewRangeCheck(body []byte, err *serde.Error) *serde.Error {
	if err != nil {
		return err
	}
	ms, _ := members(body)
	for _, m := range ms {
		var vr []int64
		if m.key == "view_range" && string(m.val) != "null" && json.Unmarshal(m.val, &vr) != nil {
			return &serde.Error{Location: []string{"body", "view_range"}, Type: serde.TypeType,
				Message: "invalid type: expected a sequence of integers" + serdeAt(body, m.valEnd)}
		}
	}
	return nil
}
