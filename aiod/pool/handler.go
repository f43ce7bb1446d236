package pool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/a2c-smcp/a2c-go/aiod"
	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
	"github.com/a2c-smcp/a2c-go/aiod/internal/egress"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
	"github.com/a2c-smcp/a2c-go/internal/origin"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// maxBody bounds a request body of the pool's own routes.
const maxBody = 256 << 10

// Handler serves the pool's API: its own routes under /v2/sandboxes,
// each sandbox's API under /sandboxes/{id}/, and the port proxy (by path
// and by host). Every route but /health wants the token; Host and Origin
// are checked first (package origin), except for a port host, which
// the port proxy judges.
func (p *Pool) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "server": "aiod pool"})
	})
	if p.cfg.Metrics != nil {
		mux.HandleFunc("GET /metrics", p.auth(p.cfg.Metrics.ServeHTTP))
	}
	mux.HandleFunc("POST /v2/sandboxes", p.auth(p.create))
	mux.HandleFunc("GET /v2/sandboxes", p.auth(p.list))
	mux.HandleFunc("GET /v2/sandboxes/{id}", p.auth(p.byID(p.get)))
	mux.HandleFunc("DELETE /v2/sandboxes/{id}", p.auth(p.delete))
	mux.HandleFunc("POST /v2/sandboxes/{id}/pause", p.auth(p.byID(p.pause)))
	mux.HandleFunc("POST /v2/sandboxes/{id}/resume", p.auth(p.byID(p.resume)))
	mux.HandleFunc("POST /v2/sandboxes/{id}/timeout", p.auth(p.byID(p.timeout)))
	mux.HandleFunc("GET /v2/sandboxes/{id}/metrics", p.auth(p.byID(p.metricsRoute)))
	mux.HandleFunc("POST /v2/sandboxes/{id}/snapshots", p.auth(p.snapshotRoute))
	mux.HandleFunc("POST /v2/sandboxes/{id}/fork", p.auth(p.forkRoute))
	mux.HandleFunc("GET /v2/snapshots", p.auth(func(w http.ResponseWriter, r *http.Request) {
		if err := p.snapshotsOffered(); err != nil {
			p.fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, SnapshotList{Snapshots: p.Snapshots()})
	}))
	mux.HandleFunc("GET /v2/snapshots/{sid}", p.auth(func(w http.ResponseWriter, r *http.Request) {
		s, err := p.GetSnapshot(r.PathValue("sid"))
		if err != nil {
			p.fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, s)
	}))
	mux.HandleFunc("DELETE /v2/snapshots/{sid}", p.auth(func(w http.ResponseWriter, r *http.Request) {
		if err := p.DeleteSnapshot(r.PathValue("sid")); err != nil {
			p.fail(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	mux.HandleFunc("POST /v2/templates", p.auth(func(w http.ResponseWriter, r *http.Request) {
		var req TemplateRequest
		if !readJSON(w, r, &req) {
			return
		}
		t, err := p.CreateTemplate(r.Context(), req)
		if err != nil {
			p.fail(w, err)
			return
		}
		writeJSON(w, http.StatusCreated, t)
	}))
	mux.HandleFunc("GET /v2/templates", p.auth(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, TemplateList{Templates: p.Templates()})
	}))
	mux.HandleFunc("DELETE /v2/templates/{name}", p.auth(func(w http.ResponseWriter, r *http.Request) {
		if err := p.DeleteTemplate(r.PathValue("name")); err != nil {
			p.fail(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	mux.HandleFunc("/v2/templates", methodNotAllowed("GET, POST"))
	mux.HandleFunc("/v2/templates/{name}", methodNotAllowed("DELETE"))
	mux.HandleFunc("/v2/snapshots", methodNotAllowed("GET"))
	mux.HandleFunc("/v2/snapshots/{sid}", methodNotAllowed("GET, DELETE"))
	mux.HandleFunc("/v2/sandboxes", methodNotAllowed("GET, POST"))
	mux.HandleFunc("/v2/sandboxes/{id}", methodNotAllowed("GET, DELETE"))
	mux.HandleFunc("/v2/sandboxes/{id}/{action}", p.auth(func(w http.ResponseWriter, r *http.Request) {
		switch r.PathValue("action") {
		case "pause", "resume", "timeout", "snapshots", "fork":
			methodNotAllowed("POST")(w, r)
		case "metrics":
			methodNotAllowed("GET")(w, r)
		default:
			writeError(w, http.StatusNotFound, "no such route")
		}
	}))
	mux.HandleFunc("/sandboxes/{id}", p.sandboxAPI)
	mux.HandleFunc("/sandboxes/{id}/", p.sandboxAPI)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if p.cfg.Fallback != nil {
			p.cfg.Fallback.ServeHTTP(w, r)
			return
		}
		if !p.authorized(r) {
			writeError(w, http.StatusUnauthorized, "Unauthorized")
			return
		}
		writeError(w, http.StatusNotFound, "no such route")
	})
	guarded := p.policy.Handler(mux, origin.Allow{Methods: "GET, POST, DELETE"}, func(w http.ResponseWriter, _ *http.Request, status int, msg string) {
		writeError(w, status, msg)
	})
	return api.BodyProgress(aiod.DefaultBodyIdle, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.lastUse.Store(time.Now().UnixNano())
		switch {
		case p.ports.ServeHost(w, r):
		case strings.HasPrefix(r.URL.Path, "/sandboxes/"):
			mux.ServeHTTP(w, r) // sandboxAPI applies the rule where the daemon does not
		case p.cfg.Fallback != nil && !p.owns(r.URL.Path):
			p.cfg.Fallback.ServeHTTP(w, r)
		default:
			guarded.ServeHTTP(w, r)
		}
	}))
}

// refused applies the Host and Origin rule to r and answers a refusal.
func (p *Pool) refused(w http.ResponseWriter, r *http.Request) bool {
	if v := p.policy.Check(r); v != origin.Allowed {
		writeError(w, v.Status(), p.policy.Refusal(v, r))
		return true
	}
	return false
}

// owns reports whether path is one of the pool's own routes.
func (p *Pool) owns(path string) bool {
	return path == "/v2/sandboxes" || strings.HasPrefix(path, "/v2/sandboxes/") || path == "/v2/snapshots" || strings.HasPrefix(path, "/v2/snapshots/") ||
		path == "/v2/templates" || strings.HasPrefix(path, "/v2/templates/") ||
		path == "/metrics" && p.cfg.Metrics != nil
}

// authorized reports whether r may use the pool's own routes: no token
// is set, or r carries it in a header (x-api-key, Authorization:
// Bearer). Never in the URL (aiod's ?api_key=): a URL lands in logs and
// histories, and a page could read it. The same header rule as the port
// proxy's.
func (p *Pool) authorized(r *http.Request) bool {
	return p.cfg.Token == "" || p.ports.headerToken(r)
}

// auth refuses a request without the pool's token (when one is set).
func (p *Pool) auth(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !p.authorized(r) {
			writeError(w, http.StatusUnauthorized, "Unauthorized")
			return
		}
		next(w, r)
	}
}

func methodNotAllowed(allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Allow", allow)
		writeError(w, http.StatusMethodNotAllowed, "method not allowed (allowed: "+allow+")")
	}
}

// writeJSON writes v as the whole answer.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":500,"message":"encoding the answer failed"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// writeError writes the pool's error body.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, ErrorBody{Error: ErrorDetail{Code: status, Message: msg}})
}

// fail writes err: an *Error as itself, anything else as a 500 whose
// text stays in the log.
func (p *Pool) fail(w http.ResponseWriter, err error) {
	var e *Error
	if errors.As(err, &e) {
		writeError(w, e.Status, e.Message)
		return
	}
	p.log.Warn("pool: request failed", "err", err)
	writeError(w, http.StatusInternalServerError, "internal error")
}

// requestBase is the pool's URL as the request reached it (its Host
// passed the Host rule already).
func requestBase(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// readJSON decodes r's body into v (decodeJSON), answering a refusal
// itself; it reports whether v holds the body.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := decodeJSON(r, v); err != nil {
		var e *Error
		errors.As(err, &e)
		writeError(w, e.Status, e.Message)
		return false
	}
	return true
}

// decodeJSON decodes r's body into v, strictly: an empty body is {}; a
// body not declared JSON is 415; unknown fields, trailing data and a
// body over maxBody are 400/413. Its errors are *Error.
func decodeJSON(r *http.Request, v any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return &Error{Status: http.StatusBadRequest, Message: "the body could not be read"}
	}
	if len(body) > maxBody {
		return &Error{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("the body is larger than %d bytes", maxBody)}
	}
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	} else if !api.JSONType(r.Header.Get("Content-Type")) {
		return &Error{Status: http.StatusUnsupportedMediaType, Message: api.MediaTypeMessage}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &Error{Status: http.StatusBadRequest, Message: decodeMessage(err)}
	}
	if _, err := dec.Token(); err != io.EOF {
		return &Error{Status: http.StatusBadRequest, Message: "the body holds more than one JSON value"}
	}
	return nil
}

// decodeMessage words a decoding error, naming the field.
func decodeMessage(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te) && te.Field != "":
		return fmt.Sprintf("%s: must be %s, not %s", te.Field, kind(te.Type.Kind().String()), te.Value)
	case errors.As(err, &te):
		return "the body must be a JSON object"
	case errors.As(err, &se):
		return fmt.Sprintf("the body is not valid JSON (at byte %d)", se.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the body is not valid JSON (it ends early)"
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if f, ok := strings.CutPrefix(msg, "unknown field "); ok {
		return "unknown field " + f
	}
	return msg
}

func kind(k string) string {
	switch k {
	case "int", "int64", "uint64", "float64":
		return "a number"
	case "string":
		return "a string"
	case "map", "struct":
		return "an object"
	case "bool":
		return "true or false"
	case "slice", "array":
		return "an array"
	}
	return "a " + k
}

// createBody is POST /v2/sandboxes as the server reads it: numbers as
// json.Number so that a fraction or an out-of-range value is refused by
// name, and the limits' fields separately.
type createBody struct {
	Template     *string           `json:"template"`
	Office       *string           `json:"office"`
	Name         *string           `json:"name"`
	TimeoutS     json.RawMessage   `json:"timeout_s"`
	OnTimeout    *string           `json:"on_timeout"`
	IdleTimeoutS json.RawMessage   `json:"idle_timeout_s"`
	Env          map[string]string `json:"env"`
	Limits       *limitsBody       `json:"limits"`
	Network      *string           `json:"network"`
	Egress       *Egress           `json:"egress"`
	Metadata     map[string]string `json:"metadata"`
	FromSnapshot *string           `json:"from_snapshot"`
	Machine      *bool             `json:"machine"`
}

type limitsBody struct {
	Memory json.RawMessage `json:"memory"`
	Pids   json.RawMessage `json:"pids"`
	CPUs   json.RawMessage `json:"cpus"`
}

func (p *Pool) create(w http.ResponseWriter, r *http.Request) {
	var body createBody
	if !readJSON(w, r, &body) {
		return
	}
	req, err := body.request()
	if err != nil {
		p.fail(w, err)
		return
	}
	s, err := p.Create(r.Context(), req, requestBase(r))
	if err != nil {
		p.fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, s)
}

// request turns the body into a CreateRequest, refusing what does not
// fit a field's type by the field's name.
func (b createBody) request() (CreateRequest, error) {
	str := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	req := CreateRequest{Template: str(b.Template), Office: str(b.Office), Name: str(b.Name), OnTimeout: str(b.OnTimeout),
		Network: str(b.Network), Egress: b.Egress, Env: b.Env, Metadata: b.Metadata, FromSnapshot: str(b.FromSnapshot),
		Machine: b.Machine}
	if present(b.TimeoutS) {
		n, err := seconds("timeout_s", b.TimeoutS)
		if err != nil {
			return req, err
		}
		req.TimeoutS = &n
	}
	if present(b.IdleTimeoutS) {
		n, err := seconds("idle_timeout_s", b.IdleTimeoutS)
		if err != nil {
			return req, err
		}
		req.IdleTimeoutS = n
	}
	if b.Limits != nil {
		req.Limits = &Limits{}
		if len(b.Limits.Memory) > 0 {
			var m Size
			if err := m.UnmarshalJSON(b.Limits.Memory); err != nil {
				return req, badField("limits.memory", err.Error())
			}
			if m != 0 {
				if err := sandbox.CheckMemory(int64(m)); err != nil {
					return req, badField("limits.memory", err.Error())
				}
			}
			req.Limits.Memory = m
		}
		if present(b.Limits.Pids) {
			n, err := strconv.Atoi(string(b.Limits.Pids))
			if err == nil && !isNumber(b.Limits.Pids) {
				err = errNotNumber
			}
			if err == nil && n != 0 { // 0 keeps the pool's default
				err = sandbox.CheckPids(n)
			}
			if err != nil {
				return req, badField("limits.pids", fmt.Sprintf("must be a whole number from %d to %d", sandbox.MinPids, sandbox.MaxPids))
			}
			req.Limits.Pids = n
		}
		if present(b.Limits.CPUs) {
			f, err := strconv.ParseFloat(string(b.Limits.CPUs), 64)
			if err == nil && !isNumber(b.Limits.CPUs) {
				err = errNotNumber
			}
			if err == nil && f != 0 { // 0 keeps the pool's default
				err = sandbox.CheckCPUs(f)
			}
			if err != nil {
				return req, badField("limits.cpus", fmt.Sprintf("must be a number of CPUs from %g to %d", sandbox.MinCPUs, sandbox.MaxCPUs))
			}
			req.Limits.CPUs = f
		}
	}
	return req, nil
}

// present reports whether a field was given (null counts as absent).
func present(raw json.RawMessage) bool { return len(raw) > 0 && !isNull(raw) }

var errNotNumber = errors.New("not a number")

// isNumber reports whether raw is a JSON number (not a string holding
// one).
func isNumber(raw json.RawMessage) bool {
	return len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9')
}

// seconds reads a whole number of seconds from 0 to MaxTimeout.
func seconds(field string, raw json.RawMessage) (int, error) {
	if !isNumber(raw) {
		return 0, badField(field, "must be a number, not "+jsonKind(raw))
	}
	v, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || v < 0 || v > MaxTimeout {
		return 0, badField(field, fmt.Sprintf("must be a whole number of seconds from 0 to %d", MaxTimeout))
	}
	return int(v), nil
}

// jsonKind names the type of a JSON value, for a refusal.
func jsonKind(raw json.RawMessage) string {
	switch {
	case len(raw) == 0:
		return "nothing"
	case raw[0] == '"':
		return "string"
	case raw[0] == '{':
		return "object"
	case raw[0] == '[':
		return "array"
	case raw[0] == 't' || raw[0] == 'f':
		return "bool"
	}
	return "number"
}

func badField(field, msg string) error {
	return &Error{Status: http.StatusBadRequest, Message: field + ": " + msg}
}

// Limits of the strings a create carries.
const (
	maxNameLen      = 128
	maxEnv          = 256
	maxEnvValue     = 32 << 10
	maxMetadata     = 64
	maxMetadataKey  = 128
	maxMetadataVal  = 1024
	maxTemplateName = 64
)

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// snapshotPlain refuses "machine": false for a sandbox from a
// snapshot (a fork, from_snapshot, or a template made of one).
func snapshotPlain() error {
	return badField("machine", "a sandbox from a snapshot, or from a template made of one, is a whole machine")
}

// check applies every rule of a create request and fills in the pool's
// defaults: the one place a field is judged, for the HTTP route and for
// in-process callers (a2c up) alike.
func (p *Pool) check(req CreateRequest) (spec, error) {
	s := spec{template: req.Template, office: req.Office, name: req.Name, onTimeout: req.OnTimeout, network: req.Network,
		metadata: map[string]string{}, limits: p.defaultLimits()}
	if s.template == "" {
		s.template = BaseTemplate
	}
	var fromTemplate *snapshot
	if _, ok := p.cfg.Templates[s.template]; !ok && s.template != BaseTemplate {
		if fromTemplate = p.snapshotTemplate(s.template); fromTemplate == nil {
			return s, badField("template", fmt.Sprintf("no template %q (this pool has: %s)", clip(s.template, maxTemplateName), strings.Join(p.templateNames(), ", ")))
		}
	}
	if err := checkText("office", s.office, maxNameLen); err != nil {
		return s, err
	}
	if s.name != "" && (len(s.name) > maxNameLen || !smcp.ValidBundleID(s.name)) {
		// The Computer's tools are <name>__sandbox_*: the name is their
		// bundle_id.
		return s, badField("name", fmt.Sprintf("must be 1 to %d of [A-Za-z0-9_-] without \"__\" (it prefixes the tools: NAME__sandbox_*)", maxNameLen))
	}
	if s.name == "" {
		s.name = DefaultName
	}
	if s.office != "" && p.cfg.Server == "" {
		return s, badField("office", "this pool was started without --server, so its sandboxes cannot join an office")
	}
	if req.Name != "" && req.Office == "" {
		return s, badField("name", "names the Computer of an office; give office too")
	}
	s.timeout = DefaultTimeout * time.Second
	if req.TimeoutS != nil {
		if *req.TimeoutS < 0 || *req.TimeoutS > MaxTimeout {
			return s, badField("timeout_s", fmt.Sprintf("must be a whole number of seconds from 0 to %d", MaxTimeout))
		}
		s.timeout = time.Duration(*req.TimeoutS) * time.Second
	}
	if req.IdleTimeoutS < 0 || req.IdleTimeoutS > MaxTimeout {
		return s, badField("idle_timeout_s", fmt.Sprintf("must be a whole number of seconds from 0 to %d", MaxTimeout))
	}
	s.idle = time.Duration(req.IdleTimeoutS) * time.Second
	// A whole machine: asked for, implied (a snapshot, or a template
	// made of one), or the pool's default (MachineAll) for a create of
	// the base template that does not say and whose network can be a
	// machine's.
	implied := req.FromSnapshot != "" || fromTemplate != nil
	machine := implied
	switch {
	case req.Machine != nil && *req.Machine:
		machine = true
	case req.Machine != nil:
		if implied {
			return s, snapshotPlain()
		}
	case p.cfg.MachineAll && s.template == BaseTemplate && s.network != NetworkHost:
		machine = true
	}
	switch s.onTimeout {
	case "":
		s.onTimeout = OnTimeoutKill
	case OnTimeoutKill, OnTimeoutPause:
	default:
		return s, badField("on_timeout", fmt.Sprintf("must be kill or pause, not %q", clip(s.onTimeout, 32)))
	}
	switch s.network {
	case "":
		s.network = NetworkNone
	case NetworkNone:
	case NetworkHost:
		if machine {
			return s, badField("network", "a whole machine has a network of its own: none or egress")
		}
		if !p.cfg.AllowHostNetwork {
			return s, badField("network", "host is allowed only where the pool was started with --allow-host-network")
		}
	case NetworkEgress:
		if p.egress == nil {
			return s, badField("network", "egress is offered only where the pool was started with --egress")
		}
	default:
		return s, badField("network", fmt.Sprintf("must be none, host or egress, not %q", clip(s.network, 32)))
	}
	if req.Egress != nil {
		if s.network != NetworkEgress {
			return s, badField("egress", "applies to network \"egress\" only")
		}
		rules, err := egress.ParseRules(req.Egress.Allow, req.Egress.Deny)
		if err != nil {
			return s, &Error{Status: http.StatusBadRequest, Message: "egress." + err.Error()} // "allow: ..." or "deny: ..."
		}
		s.rules = rules
		s.egress = &Egress{Allow: nonNil(req.Egress.Allow), Deny: nonNil(req.Egress.Deny)}
	} else if s.network == NetworkEgress {
		s.egress = &Egress{Allow: []string{}, Deny: []string{}}
	}
	if len(req.Env) > maxEnv {
		return s, badField("env", fmt.Sprintf("holds %d variables; at most %d", len(req.Env), maxEnv))
	}
	for k, v := range req.Env {
		if !envName.MatchString(k) || len(k) > maxNameLen {
			return s, badField("env", fmt.Sprintf("%q is not a variable name ([A-Za-z_][A-Za-z0-9_]*)", clip(k, 64)))
		}
		if strings.IndexByte(v, 0) >= 0 || len(v) > maxEnvValue {
			return s, badField("env."+k, fmt.Sprintf("must be at most %d bytes with no NUL", maxEnvValue))
		}
		s.env = append(s.env, k+"="+v)
	}
	if req.Limits != nil {
		if req.Limits.Memory != 0 {
			if err := sandbox.CheckMemory(int64(req.Limits.Memory)); err != nil {
				return s, badField("limits.memory", err.Error())
			}
			s.limits.Memory = req.Limits.Memory
		}
		if req.Limits.Pids != 0 {
			if err := sandbox.CheckPids(req.Limits.Pids); err != nil {
				return s, badField("limits.pids", err.Error())
			}
			s.limits.Pids = req.Limits.Pids
		}
		if req.Limits.CPUs != 0 {
			if err := sandbox.CheckCPUs(req.Limits.CPUs); err != nil {
				return s, badField("limits.cpus", err.Error())
			}
			s.limits.CPUs = req.Limits.CPUs
		}
	}
	from, err := p.checkFrom(req.FromSnapshot, req.Template)
	if err != nil {
		return s, err
	}
	if fromTemplate != nil {
		from = fromTemplate
	}
	s.from, s.machine = from, machine || from != nil
	if s.machine && !p.cfg.Machine {
		return s, badField("machine", "whole machines are offered only where the pool was started with --machine")
	}
	if len(req.Metadata) > maxMetadata {
		return s, badField("metadata", fmt.Sprintf("holds %d keys; at most %d", len(req.Metadata), maxMetadata))
	}
	for k, v := range req.Metadata {
		if k == "" || len(k) > maxMetadataKey || !printable(k) {
			return s, badField("metadata", fmt.Sprintf("key %q must be 1 to %d printable characters", clip(k, 64), maxMetadataKey))
		}
		if len(v) > maxMetadataVal || !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
			return s, badField("metadata."+k, fmt.Sprintf("must be valid UTF-8 of at most %d bytes", maxMetadataVal))
		}
		s.metadata[k] = v
	}
	return s, nil
}

// nonNil is l, or an empty list for nil (written [] on the wire).
func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// checkText refuses a name that is too long, not UTF-8 or holds a
// control character.
func checkText(field, v string, n int) error {
	if len(v) > n || !printable(v) {
		return badField(field, fmt.Sprintf("must be at most %d printable characters", n))
	}
	return nil
}

// clip shortens an echoed input.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func (p *Pool) templateNames() []string {
	names := []string{BaseTemplate}
	for n := range p.cfg.Templates {
		names = append(names, n)
	}
	for _, t := range p.Templates() {
		names = append(names, t.Name)
	}
	slices.Sort(names[1:])
	return names
}

func (p *Pool) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := ListFilter{State: q.Get("state"), Office: q.Get("office"), Metadata: map[string]string{}}
	switch f.State {
	case "", string(Running), string(Paused), string(Starting):
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("state: must be running, paused or starting, not %q", clip(f.State, 32)))
		return
	}
	for k, vs := range q {
		switch {
		case k == "state" || k == "office":
		case strings.HasPrefix(k, "metadata.") && len(k) > len("metadata."):
			f.Metadata[strings.TrimPrefix(k, "metadata.")] = vs[0]
		default:
			writeError(w, http.StatusBadRequest, fmt.Sprintf("unknown filter %q (state, office, metadata.KEY)", clip(k, 64)))
			return
		}
	}
	writeJSON(w, http.StatusOK, List{Sandboxes: p.List(f, requestBase(r))})
}

// pathID is the {id} of the route, refused early (404) when it cannot
// be one.
func pathID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if !validID(id) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no sandbox %q", clip(id, 64)))
		return "", false
	}
	return id, true
}

// byID is a route of one sandbox: the {id} checked first (404 when it
// cannot be one), then op's answer, 200 with its value, or its error.
func (p *Pool) byID(op func(r *http.Request, id string) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, ok := pathID(w, r)
		if !ok {
			return
		}
		v, err := op(r, id)
		if err != nil {
			p.fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}

func (p *Pool) get(r *http.Request, id string) (any, error) { return p.Get(id, requestBase(r)) }

func (p *Pool) pause(r *http.Request, id string) (any, error) { return p.Pause(id, requestBase(r)) }

func (p *Pool) metricsRoute(_ *http.Request, id string) (any, error) { return p.Metrics(id) }

// snapshotRoute is POST /v2/sandboxes/{id}/snapshots: 201 with the
// snapshot. It takes no body.
func (p *Pool) snapshotRoute(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	var none struct{}
	if !readJSON(w, r, &none) {
		return
	}
	s, err := p.TakeSnapshot(id)
	if err != nil {
		p.fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, s)
}

// forkRoute is POST /v2/sandboxes/{id}/fork: the body, optional, is a
// create's (its from_snapshot refused); 201 with the new sandbox.
func (p *Pool) forkRoute(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	var body createBody
	if !readJSON(w, r, &body) {
		return
	}
	req, err := body.request()
	if err != nil {
		p.fail(w, err)
		return
	}
	s, err := p.Fork(r.Context(), id, req, requestBase(r))
	if err != nil {
		p.fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, s)
}

func (p *Pool) delete(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	keep := false
	if v := r.URL.Query().Get("keep_workspace"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, "keep_workspace: must be true or false")
			return
		}
		keep = b
	}
	// Bounded: a sandbox's end waits for its processes at most so long.
	ctx, cancel := context.WithTimeout(r.Context(), ShutdownBound)
	defer cancel()
	if err := p.Delete(ctx, id, keep); err != nil {
		p.fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// timeoutBody is the body of resume (optional) and timeout.
type timeoutBody struct {
	TimeoutS json.RawMessage `json:"timeout_s"`
}

// timeoutArg reads timeout_s from r's body: nil when absent (an error
// when required), else the checked number of seconds.
func timeoutArg(r *http.Request, required bool) (*int, error) {
	var body timeoutBody
	if err := decodeJSON(r, &body); err != nil {
		return nil, err
	}
	if !present(body.TimeoutS) {
		if required {
			return nil, &Error{Status: http.StatusBadRequest, Message: "missing field `timeout_s`"}
		}
		return nil, nil
	}
	n, err := seconds("timeout_s", body.TimeoutS)
	if err != nil {
		return nil, err
	}
	return &n, nil
}

func (p *Pool) resume(r *http.Request, id string) (any, error) {
	t, err := timeoutArg(r, false)
	if err != nil {
		return nil, err
	}
	return p.Resume(id, t, requestBase(r))
}

func (p *Pool) timeout(r *http.Request, id string) (any, error) {
	t, err := timeoutArg(r, true)
	if err != nil {
		return nil, err
	}
	return p.SetTimeout(id, *t, requestBase(r))
}

// sandboxAPI serves /sandboxes/{id}/...: the port proxy for
// /sandboxes/{id}/ports/{port}/..., else the sandbox's own daemon with
// the prefix stripped. A known sandbox's daemon checks the token itself
// (it holds the pool's), with a lone aiod's public routes and answers;
// for an unknown id the token is asked first, so an id's existence is
// not told to a caller without it.
func (p *Pool) sandboxAPI(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	b, ok := p.lookup(id)
	if !ok || !validID(id) {
		if p.refused(w, r) {
			return
		}
		if !p.authorized(r) {
			writeError(w, http.StatusUnauthorized, "Unauthorized")
			return
		}
		writeError(w, http.StatusNotFound, fmt.Sprintf("no sandbox %q", clip(id, 64)))
		return
	}
	prefix := "/sandboxes/" + id
	rest := strings.TrimPrefix(r.URL.Path, prefix)
	if port, tail, isPort := portPath(rest); isPort {
		if p.refused(w, r) {
			return
		}
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > math.MaxUint16 || port[0] == '0' {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("port: must be a number from 1 to 65535, not %q", clip(port, 16)))
			return
		}
		p.ports.ServePath(w, r, id, n, tail)
		return
	}
	r2 := new(http.Request)
	*r2 = *r
	u := *r.URL
	u.Path = rest
	if u.Path == "" {
		u.Path = "/"
	}
	u.RawPath = ""
	if raw := r.URL.RawPath; raw != "" {
		u.RawPath = strings.TrimPrefix(raw, prefix)
		if u.RawPath == "" {
			u.RawPath = "/"
		}
	}
	r2.URL = &u
	r2.RequestURI = u.RequestURI()
	b.serve(w, r2)
}

// portPath splits "/ports/{port}/rest" into port and "/rest".
func portPath(rest string) (port, tail string, ok bool) {
	after, ok := strings.CutPrefix(rest, "/ports/")
	if !ok {
		return "", "", false
	}
	port, tail, _ = strings.Cut(after, "/")
	return port, "/" + tail, true
}
