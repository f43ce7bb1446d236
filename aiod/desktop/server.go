package desktop

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/base64"
	"errors"
	"io"
	stdlog "log"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jezek/xgb"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/a2c-smcp/a2c-go/aiod/computer"
	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
	"github.com/a2c-smcp/a2c-go/aiod/internal/serde"
	"github.com/a2c-smcp/a2c-go/internal/origin"
)

// worker is the computer-use worker's state: the X connection, the
// programs it runs, the input lock, the clipboard holder and the
// recorder.
type worker struct {
	displayName string
	xauth       string
	key         string
	x           display
	xdotool     tool
	xclip       tool
	ffmpeg      tool
	childEnv    []string
	log         *slog.Logger
	// origins is the Host and Origin rule every route meets first (nil:
	// the loopback names only). aiod reaches the worker with a request
	// of its own, naming the worker's address and carrying no Origin; a
	// page that found the port is refused before the key is asked for.
	origins *origin.Policy

	// input is held for each action and for a whole batch: one sequence
	// at a time drives the display, in arrival order.
	input inputQueue
	// held is what KEY_DOWN and MOUSE_DOWN left pressed (released at stop).
	held heldInput
	clip clipboard
	rec  recorder

	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	actions  *prometheus.CounterVec
	shots    prometheus.Histogram
	snapshot atomic.Uint64
}

//go:embed openapi.json
var openapiDoc []byte

// quietXGB silences xgb's package logger once: its goroutines read it.
var quietXGB sync.Once

func newWorker(displayName, xauth, key string, log *slog.Logger) *worker {
	// xgb's own log lines (a missing ~/.Xauthority, say) are not ours:
	// failures reach the worker as errors, worded here.
	quietXGB.Do(func() { xgb.Logger = stdlog.New(io.Discard, "", 0) })
	w := &worker{
		displayName: displayName, xauth: xauth, key: key, log: log,
		x:        display{name: displayName},
		xdotool:  findTool("xdotool"),
		xclip:    findTool("xclip"),
		ffmpeg:   findTool("ffmpeg"),
		childEnv: childEnv(displayName, xauth),
		reg:      prometheus.NewRegistry(),
	}
	w.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "computer_use_requests_total",
		Help: "HTTP requests answered, by route and status code."}, []string{"route", "code"})
	w.actions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "computer_use_actions_total",
		Help: "Actions run, by type and result (ok, error)."}, []string{"action_type", "result"})
	w.shots = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "computer_use_screenshot_seconds",
		Help: "Time to capture and encode a screenshot.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 10)})
	w.reg.MustRegister(w.requests, w.actions, w.shots, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return w
}

// close ends what the worker started: the recording, the clipboard
// holder, the X connection; first it releases the keys and buttons its
// clients left pressed.
func (w *worker) close() {
	w.releaseHeld()
	w.rec.stop()
	w.clip.stop()
	w.x.close()
}

// noDisplay is the 503 of a route that needs the X server while it
// cannot be reached.
func (w *worker) noDisplay() error {
	return api.NewError(api.ErrUnavailable, "X display "+w.displayName+" is not reachable").
		WithHint("check that the X server (Xvfb) on DISPLAY=" + w.displayName + " runs")
}

// withX runs f on the X connection (dialling if needed). A failure of
// the connection itself (anything but an X protocol error, an answer
// for the client, a cancelled context or errPixelFormat) drops the
// connection and is noDisplay(), as is no connection; other errors are
// f's, for the caller to word.
func (w *worker) withX(f func(x *xconn) error) error {
	x, err := w.x.get()
	if err != nil {
		return w.noDisplay()
	}
	err = f(x)
	var xe xgb.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &xe), isAnswer(err), errors.Is(err, errPixelFormat),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	w.x.broken(x, err)
	return w.noDisplay()
}

// xError is the answer for an error of withX on a read-only route: an X
// protocol error (a window gone mid-read, a server refusing) is a 503
// saying so; the rest are already answers.
func (w *worker) xError(err error) error {
	var xe xgb.Error
	if errors.As(err, &xe) {
		w.log.Warn("X request failed", "error", err.Error())
		return api.NewError(api.ErrUnavailable, "the X server refused the request")
	}
	return err
}

// handler is the worker's HTTP surface.
func (w *worker) handler(bodyIdle time.Duration) http.Handler {
	mux := http.NewServeMux()
	route := func(pattern string, h http.HandlerFunc) {
		mux.Handle(pattern, w.count(pattern, h))
	}
	route("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) { api.OK(rw, map[string]string{"status": "ok"}) })
	route("GET /openapi.json", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		_, _ = rw.Write(openapiDoc)
	})
	route("GET /capabilities", func(rw http.ResponseWriter, r *http.Request) { api.JSON(rw, http.StatusOK, w.capabilities()) })
	mux.Handle("GET /metrics", promhttp.HandlerFor(w.reg, promhttp.HandlerOpts{}))
	route("GET /v2/computer/info", w.info)
	route("GET /v2/computer/screenshot", w.screenshot)
	route("POST /v2/computer/actions", w.action)
	route("POST /v2/computer/actions/batch", w.batch)
	route("GET /v2/computer/cursor", w.cursor)
	route("GET /v2/computer/clipboard", w.clipboardRoute)
	route("GET /v2/computer/windows", w.windowsRoute)
	route("GET /v2/computer/accessibility", w.accessibility)
	route("GET /v2/computer/accessibility/nodes", w.accessibility)
	route("POST /v2/computer/record", w.recordRoute)
	pol := w.origins
	if pol == nil {
		pol = origin.Loopback()
	}
	guarded := pol.Handler(w.auth(api.EnvelopeErrors(mux)), origin.Allow{}, func(rw http.ResponseWriter, _ *http.Request, status int, msg string) {
		api.Fail(rw, status, msg, nil)
	})
	return api.BodyProgress(bodyIdle, guarded)
}

// publicPaths answer without the key.
var publicPaths = map[string]bool{"/healthz": true, "/openapi.json": true}

// auth refuses every route but /healthz and /openapi.json without the
// key, when one is set: as aiod does, Authorization: Bearer, x-api-key
// or ?api_key=. aiod forwards its clients' headers and query unchanged,
// so one key serves both when they share AIO_API_KEY.
func (w *worker) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if w.key == "" || publicPaths[r.URL.Path] || api.HasKey(r, w.key) {
			next.ServeHTTP(rw, r)
			return
		}
		api.Fail(rw, http.StatusUnauthorized, "Unauthorized", nil)
	})
}

// count records each answer's route and status.
func (w *worker) count(pattern string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		sw := api.NewStatusWriter(rw)
		h.ServeHTTP(sw, r)
		w.requests.WithLabelValues(pattern, strconv.Itoa(sw.Status)).Inc()
	})
}

// capability is GET /capabilities: schema_version 1 and the GuiCapability
// fields, in the one type that aiod reads them back into and reports as
// capabilities.computer (computer.Capability).
type capability struct {
	SchemaVersion int `json:"schema_version"`
	computer.Capability
}

// capabilities reads the display and the programs now. Status: ready
// with the display and every program, degraded with the display but a
// program missing, absent without the display.
func (w *worker) capabilities() capability {
	provider, name := "external", w.displayName
	c := capability{SchemaVersion: 1, Capability: computer.Capability{Provider: &provider, Display: &name, Missing: []string{}, Warnings: []string{}}}
	var (
		scr screen
		x   *xconn
	)
	if err := w.withX(func(cx *xconn) (err error) {
		x = cx
		scr, err = cx.size()
		return err
	}); err == nil {
		c.Resolution = computer.Resolution{Width: &scr.Width, Height: &scr.Height}
	} else {
		c.Status = "absent"
		c.Missing = append(c.Missing, "display")
		c.Warnings = append(c.Warnings, "X display "+w.displayName+" is not reachable")
		return c
	}
	c.Screenshot = x.bpp == 32 && x.lsb
	if !c.Screenshot {
		c.Warnings = append(c.Warnings, "the screen's pixel format is not 32-bit TrueColor: screenshots are unavailable")
	}
	if !x.xtest {
		c.Missing = append(c.Missing, "xtest")
		c.Warnings = append(c.Warnings, "the X server has no XTEST extension: pointer input is unavailable")
	}
	c.Actions = x.xtest && w.xdotool.path != ""
	c.Clipboard = w.xclip.path != ""
	c.Recording = w.ffmpeg.path != ""
	for _, t := range []tool{w.xdotool, w.xclip, w.ffmpeg} {
		if t.path == "" {
			c.Missing = append(c.Missing, t.name)
			c.Warnings = append(c.Warnings, t.name+" is not installed (apt-get install "+t.pkg+")")
		}
	}
	c.Status = "ready"
	if len(c.Missing) > 0 || !c.Screenshot {
		c.Status = "degraded"
	}
	return c
}

// displayInfo is GET info's data.
type displayInfo struct {
	Available        bool                `json:"available"`
	Display          *string             `json:"display"`
	XAuthority       *string             `json:"xauthority"`
	ScreenResolution computer.Resolution `json:"screen_resolution"`
	Capabilities     struct {
		Screenshot bool `json:"screenshot"`
		Actions    bool `json:"actions"`
		Clipboard  bool `json:"clipboard"`
		Recording  bool `json:"recording"`
	} `json:"capabilities"`
	Warnings []string `json:"warnings"`
}

func (w *worker) info(rw http.ResponseWriter, _ *http.Request) {
	c := w.capabilities()
	d := displayInfo{Available: c.Status != "absent", Display: c.Display, ScreenResolution: c.Resolution, Warnings: c.Warnings}
	if w.xauth != "" {
		d.XAuthority = &w.xauth
	}
	d.Capabilities.Screenshot, d.Capabilities.Actions, d.Capabilities.Clipboard, d.Capabilities.Recording = c.Screenshot, c.Actions, c.Clipboard, c.Recording
	api.OK(rw, d)
}

// shot captures the screen and encodes it as PNG; the buffer goes back
// with releaseBuffer.
func (w *worker) shot() (png *pngShot, err error) {
	start := time.Now()
	var (
		f       frame
		release func()
	)
	err = w.withX(func(x *xconn) (err error) {
		f, release, err = x.capture()
		return err
	})
	var xe xgb.Error
	switch {
	case errors.Is(err, errPixelFormat):
		return nil, api.NewError(api.ErrUnavailable, "the screen's pixel format is not 32-bit TrueColor: screenshots are unavailable")
	case errors.As(err, &xe):
		return nil, api.NewError(api.ErrUnavailable, "the X server refused the screenshot")
	case err != nil:
		return nil, err
	}
	buf, err := encodePNG(f)
	release()
	if err != nil {
		return nil, api.NewError(api.ErrInternal, "could not encode the screenshot")
	}
	w.shots.Observe(time.Since(start).Seconds())
	return &pngShot{buf: buf, width: f.width, height: f.height}, nil
}

// pngShot is an encoded screenshot in a pooled buffer.
type pngShot struct {
	buf           *bytes.Buffer
	width, height int
}

func (p *pngShot) release() { releaseBuffer(p.buf) }

func (w *worker) screenshot(rw http.ResponseWriter, _ *http.Request) {
	s, err := w.shot()
	if err != nil {
		api.WriteError(rw, err)
		return
	}
	defer s.release()
	b := s.buf.Bytes()
	h := rw.Header()
	h.Set("Content-Type", "image/png")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("X-Image-Width", strconv.Itoa(s.width))
	h.Set("X-Image-Height", strconv.Itoa(s.height))
	h.Set("X-Screen-Width", strconv.Itoa(s.width))
	h.Set("X-Screen-Height", strconv.Itoa(s.height))
	_, _ = rw.Write(b)
}

// base64Shot is a screenshot for a JSON answer: the base64 PNG, or why
// it could not be taken.
func (w *worker) base64Shot() (shot, shotErr *string) {
	s, err := w.shot()
	if err != nil {
		msg := errText(err)
		return nil, &msg
	}
	defer s.release()
	enc := base64.StdEncoding.EncodeToString(s.buf.Bytes())
	return &enc, nil
}

// screen is the display's size for validating coordinates; zero when the
// display cannot be reached (the action then answers 503).
func (w *worker) screen() screen {
	var s screen
	_ = w.withX(func(x *xconn) (err error) {
		s, err = x.size()
		return err
	})
	return s
}

// actionReply is POST actions' answer: the envelope plus the 1.x
// top-level status and action_performed, and the screenshot when asked.
type actionReply struct {
	Success         bool       `json:"success"`
	Message         string     `json:"message"`
	Data            actionData `json:"data"`
	Hint            *string    `json:"hint"`
	Status          string     `json:"status"`
	ActionPerformed string     `json:"action_performed"`
	Screenshot      *string    `json:"screenshot,omitempty"`
	ScreenshotError *string    `json:"screenshot_error,omitempty"`
}

// actionData is POST actions' data.
type actionData struct {
	Status          string `json:"status"`
	ActionPerformed string `json:"action_performed"`
}

type actionQuery struct {
	IncludeScreenshot *bool `json:"include_screenshot"`
}

func (w *worker) action(rw http.ResponseWriter, r *http.Request) {
	var q actionQuery
	if !api.Query(rw, r, &q) {
		return
	}
	body, ok := api.ReadBody(rw, r)
	if !ok {
		return
	}
	scr := w.screen()
	a, err := decodeAction(body, scr, []string{"body"})
	if err != nil {
		api.WriteError(rw, err)
		return
	}
	if scr.Width == 0 && a.Type != "WAIT" {
		api.WriteError(rw, w.noDisplay())
		return
	}
	if err := w.input.acquire(r.Context(), inputWait); err != nil {
		if !gone(err) {
			api.WriteError(rw, err)
		}
		return
	}
	defer w.input.release()
	if err := w.perform(r.Context(), a); err != nil {
		w.actions.WithLabelValues(a.Type, "error").Inc()
		if r.Context().Err() == nil {
			api.WriteError(rw, err)
		}
		return
	}
	w.actions.WithLabelValues(a.Type, "ok").Inc()
	reply := actionReply{Success: true, Message: api.SuccessMessage, Data: actionData{Status: "success", ActionPerformed: a.Type},
		Status: "success", ActionPerformed: a.Type}
	if q.IncludeScreenshot != nil && *q.IncludeScreenshot {
		reply.Screenshot, reply.ScreenshotError = w.base64Shot()
	}
	api.JSON(rw, http.StatusOK, reply)
}

// batchResult is POST actions/batch's data.
type batchResult struct {
	Performed       []string `json:"performed"`
	FailedIndex     *int     `json:"failed_index"`
	Error           *string  `json:"error"`
	Status          *string  `json:"status,omitempty"`
	Reason          *string  `json:"reason,omitempty"`
	Screenshot      *string  `json:"screenshot"`
	ScreenshotError *string  `json:"screenshot_error"`
}

// batch runs the actions in order under the input lock and stops at the
// first failure; it answers 200 whatever happened once the batch was
// valid (see decodeBatch), with success false when an action failed.
func (w *worker) batch(rw http.ResponseWriter, r *http.Request) {
	body, ok := api.ReadBody(rw, r)
	if !ok {
		return
	}
	scr := w.screen()
	req, err := decodeBatch(body, scr)
	if err != nil {
		api.WriteError(rw, err)
		return
	}
	if scr.Width == 0 && slices.ContainsFunc(req.Actions, func(a *action) bool { return a.Type != "WAIT" }) {
		api.WriteError(rw, w.noDisplay())
		return
	}
	if err := w.input.acquire(r.Context(), inputWait); err != nil {
		if !gone(err) {
			api.WriteError(rw, err)
		}
		return
	}
	defer w.input.release()
	res := batchResult{Performed: []string{}}
	msg := api.SuccessMessage
	for i, a := range req.Actions {
		if r.Context().Err() != nil {
			return // the client left: the rest of the batch is not run
		}
		if err := w.perform(r.Context(), a); err != nil {
			w.actions.WithLabelValues(a.Type, "error").Inc()
			if r.Context().Err() != nil {
				return
			}
			text := errText(err)
			res.FailedIndex, res.Error = &i, &text
			msg = "Action " + strconv.Itoa(i) + " (" + a.Type + ") failed: " + text
			break
		}
		w.actions.WithLabelValues(a.Type, "ok").Inc()
		res.Performed = append(res.Performed, a.Type)
	}
	if req.IncludeScreenshot {
		res.Screenshot, res.ScreenshotError = w.base64Shot()
	}
	api.JSON(rw, http.StatusOK, api.Envelope{Success: res.FailedIndex == nil, Message: msg, Data: res})
}

func (w *worker) cursor(rw http.ResponseWriter, _ *http.Request) {
	var px, py int
	if err := w.withX(func(x *xconn) (err error) {
		px, py, err = x.pointer()
		return err
	}); err != nil {
		api.WriteError(rw, w.xError(err))
		return
	}
	api.OK(rw, map[string]int{"x": px, "y": py})
}

func (w *worker) clipboardRoute(rw http.ResponseWriter, r *http.Request) {
	text, err := w.readClipboard(r.Context())
	if err != nil {
		api.WriteError(rw, err)
		return
	}
	api.OK(rw, map[string]string{"format": "text", "text": text})
}

func (w *worker) windowsRoute(rw http.ResponseWriter, _ *http.Request) {
	var wins []window
	if err := w.withX(func(x *xconn) (err error) {
		wins, err = x.windows()
		return err
	}); err != nil {
		api.WriteError(rw, w.xError(err))
		return
	}
	id := "w" + strconv.FormatUint(w.snapshot.Add(1), 10)
	api.OK(rw, map[string]any{"snapshot_id": id, "windows": wins})
}

func (w *worker) accessibility(rw http.ResponseWriter, _ *http.Request) {
	api.WriteError(rw, errNoAccessibility)
}

func (w *worker) recordRoute(rw http.ResponseWriter, r *http.Request) {
	var req recordRequest
	if !api.Body(rw, r, &req) {
		return
	}
	s, err := w.record(req)
	if err != nil {
		api.WriteError(rw, err)
		return
	}
	api.OK(rw, s)
}

// errText is the client-facing text of a refusal.
func errText(err error) string {
	var se *serde.Error
	if errors.As(err, &se) {
		return se.Message
	}
	msg, _ := api.MessageOf(err)
	return msg
}
