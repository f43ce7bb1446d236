package desktop

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
	"github.com/a2c-smcp/a2c-go/aiod/internal/child"
)

// Recording limits and defaults (digest §2.2).
const (
	defaultFPS         = 30
	maxFPS             = 60
	defaultCRF         = 30
	maxCRF             = 51
	defaultMaxDuration = 60.0
	maxRecordDuration  = 600.0
	// recordStopWait is how long ffmpeg may take to finish the file
	// after SIGINT before it is killed.
	recordStopWait = 10 * time.Second
)

// recordRequest is POST record's body.
type recordRequest struct {
	Action      string   `json:"action" serde:"required,enum=start|status|stop"`
	FPS         *uint32  `json:"fps"`
	CRF         *uint32  `json:"crf"`
	MaxDuration *float64 `json:"max_duration"`
	Width       *uint32  `json:"width"`
	Height      *uint32  `json:"height"`
	SavePath    *string  `json:"save_path"`
}

// recordState is POST record's data. Error is null unless the
// recording ended in error (ffmpeg failed: a full disk, an X server
// gone, a stop it did not finish in time); Status is then "stopped" as
// for any ended recording, and the file may be empty or cut short.
type recordState struct {
	Status        string  `json:"status"` // idle, recording, stopped
	Duration      float64 `json:"duration"`
	SavePath      *string `json:"save_path"`
	FileSizeBytes *int64  `json:"file_size_bytes"`
	Error         *string `json:"error"`
}

// recorder runs at most one ffmpeg x11grab at a time; cur is the last
// recording started (nil: idle).
type recorder struct {
	start sync.Mutex // held by a start from its check to its end
	mu    sync.Mutex // guards cur
	cur   *recording
}

// recording is one ffmpeg run. done is closed by the one goroutine that
// waits for ffmpeg.
type recording struct {
	cmd   *exec.Cmd
	done  chan struct{}
	path  string
	start time.Time
	// recorded is how much video ffmpeg has encoded, from its progress
	// reports: the recording's duration. It is 0 until the first frames
	// are written (a loaded machine may take a second to get there, and
	// a recording stopped before that holds nothing).
	recorded progress
	// interrupted: stop sent SIGINT (ffmpeg then exits 255 after
	// finishing the file, which is no failure).
	interrupted atomic.Bool
	// failure is why the recording ended in error ("" when it did not);
	// written before done is closed, read after.
	failure string
}

// failureOf words how ffmpeg ended for the client, "" for a normal end:
// exit 0 (max_duration reached) or, after stop's SIGINT, 255.
func failureOf(err error, interrupted bool, stderr *child.Tail) string {
	if err == nil {
		return ""
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if interrupted && ee.ExitCode() == 255 {
			return ""
		}
		if interrupted && ee.ExitCode() == -1 {
			return "the recording failed: ffmpeg did not finish the file within 10 s of the stop and was killed"
		}
	}
	msg := "the recording failed: ffmpeg " + err.Error()
	if lines := stderr.LastLines(1); len(lines) == 1 {
		line := lines[0]
		if len(line) > 300 {
			line = strings.ToValidUTF8(line[:300], "")
		}
		msg += ": " + line
	}
	return msg
}

// progress reads ffmpeg's -progress reports (key=value lines) and keeps
// the latest out_time_us. ffmpeg writes it from exec's copying
// goroutine while requests read it.
type progress struct {
	us      atomic.Int64
	partial []byte // an unfinished line; only the writer touches it
}

func (p *progress) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(p.partial) < 256 { // a report line is short; drop runaway text
				p.partial = append(p.partial, b...)
			}
			break
		}
		line := append(p.partial, b[:i]...)
		p.partial = p.partial[:0]
		b = b[i+1:]
		if v, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("out_time_us=")); ok {
			if us, err := strconv.ParseInt(string(v), 10, 64); err == nil && us > 0 {
				p.us.Store(us)
			}
		}
	}
	return n, nil
}

// seconds is the video encoded so far.
func (p *progress) seconds() float64 { return float64(p.us.Load()) / 1e6 }

// record answers POST record.
func (w *worker) record(req recordRequest) (recordState, error) {
	r := &w.rec
	switch req.Action {
	case "status":
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.stateLocked(), nil
	case "stop":
		return r.stop(), nil
	}
	return w.startRecording(req)
}

func (w *worker) startRecording(req recordRequest) (recordState, error) {
	loc := []string{"body"}
	fps, crf, maxDur := uint32(defaultFPS), uint32(defaultCRF), defaultMaxDuration
	if req.FPS != nil {
		if fps = *req.FPS; fps < 1 || fps > maxFPS {
			return recordState{}, fieldError(loc, "fps", fmt.Sprintf("fps must be between 1 and %d", maxFPS))
		}
	}
	if req.CRF != nil {
		if crf = *req.CRF; crf > maxCRF {
			return recordState{}, fieldError(loc, "crf", fmt.Sprintf("crf must be between 0 and %d", maxCRF))
		}
	}
	if req.MaxDuration != nil {
		if maxDur = *req.MaxDuration; !(maxDur > 0 && maxDur <= maxRecordDuration) {
			return recordState{}, fieldError(loc, "max_duration", fmt.Sprintf("max_duration must be greater than 0 and at most %g seconds", maxRecordDuration))
		}
	}
	if w.ffmpeg.path == "" {
		return recordState{}, w.ffmpeg.unavailable()
	}
	var scr screen
	if err := w.withX(func(x *xconn) (err error) {
		scr, err = x.size()
		return err
	}); err != nil {
		return recordState{}, w.xError(err)
	}
	width, height := scr.Width, scr.Height
	if req.Width != nil {
		if width = int(*req.Width); width < 2 || width > scr.Width {
			return recordState{}, fieldError(loc, "width", fmt.Sprintf("width must be between 2 and the screen's %d", scr.Width))
		}
	}
	if req.Height != nil {
		if height = int(*req.Height); height < 2 || height > scr.Height {
			return recordState{}, fieldError(loc, "height", fmt.Sprintf("height must be between 2 and the screen's %d", scr.Height))
		}
	}
	// Starts take turns (r.start); r.mu is held only to read and set
	// the state, never across file or process work that may block, so
	// status and stop answer meanwhile.
	r := &w.rec
	r.start.Lock()
	defer r.start.Unlock()
	r.mu.Lock()
	running := r.cur != nil && !closed(r.cur.done)
	r.mu.Unlock()
	if running {
		return recordState{}, api.NewError(api.ErrConflict, "a recording is already running").WithHint("stop it first (action stop)")
	}
	path := filepath.Join(os.TempDir(), "recording_"+time.Now().Format("20060102_150405")+".mp4")
	if req.SavePath != nil && *req.SavePath != "" {
		var err error
		if path, err = filepath.Abs(*req.SavePath); err != nil {
			return recordState{}, api.NewError(api.ErrInvalid, "save_path is not a usable path").WithField("save_path")
		}
	}
	created, err := prepareOutput(path)
	switch {
	case errors.Is(err, errNotRegular):
		return recordState{}, api.NewError(api.ErrInvalid, "save_path is not a regular file: "+path).
			WithHint("name a new file or an existing regular file (not a FIFO, device, folder or symbolic link)").WithField("save_path")
	case err != nil:
		return recordState{}, api.NewError(api.ErrInvalid, "save_path is not writable: "+path).WithField("save_path")
	}
	args := []string{"-hide_banner", "-nostdin", "-loglevel", "error", "-progress", "pipe:1", "-stats_period", "0.25",
		"-f", "x11grab", "-draw_mouse", "1", "-framerate", strconv.Itoa(int(fps)),
		"-video_size", fmt.Sprintf("%dx%d", width, height), "-i", w.displayName + "+0,0",
		"-t", strconv.FormatFloat(maxDur, 'f', 3, 64),
		"-c:v", "libx264", "-preset", "ultrafast", "-crf", strconv.Itoa(int(crf)), "-pix_fmt", "yuv420p",
		"-vf", "scale=trunc(iw/2)*2:trunc(ih/2)*2", "-movflags", "+faststart", "-f", "mp4", "-y", path}
	cmd := exec.Command(w.ffmpeg.path, args...)
	cmd.Env = w.childEnv
	logBuf := child.NewTail(16 << 10)
	rec := &recording{cmd: cmd, done: make(chan struct{}), path: path}
	cmd.Stdout, cmd.Stderr = &rec.recorded, logBuf
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		if created {
			_ = os.Remove(path)
		}
		te := &toolError{tool: "ffmpeg", err: err}
		w.logToolError(te, "x11grab")
		return recordState{}, te
	}
	rec.start = time.Now()
	go func() { // the owner of ffmpeg's exit: ends when ffmpeg does
		err := cmd.Wait()
		rec.failure = failureOf(err, rec.interrupted.Load(), logBuf)
		if rec.failure != "" {
			w.log.Warn("recording failed", "save_path", path, "error", child.ExitText(err), "stderr", strings.TrimSpace(logBuf.String()))
		} else if out := strings.TrimSpace(logBuf.String()); out != "" {
			w.log.Info("recording ended", "save_path", path, "stderr", out)
		}
		close(rec.done)
	}()
	// ffmpeg that cannot grab the display fails at once: say so now
	// rather than at stop.
	select {
	case <-rec.done:
		if created {
			_ = os.Remove(path)
		}
		return recordState{}, api.NewError(api.ErrUnavailable, "ffmpeg could not record the display")
	case <-time.After(150 * time.Millisecond):
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cur = rec
	return r.stateLocked(), nil
}

// errNotRegular is a save_path that exists and is not a regular file.
var errNotRegular = errors.New("not a regular file")

// prepareOutput creates path's parent folders and checks that path can
// be written (creating it empty); created says whether it did not exist.
// A path that exists and is not a regular file (a FIFO, whose open would
// block until a reader comes, a device, a folder, a symbolic link) is
// errNotRegular; the file is opened without following a link and
// without blocking, and checked again once open.
func prepareOutput(path string) (created bool, err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, err
	}
	fi, err := os.Lstat(path)
	switch {
	case err == nil && !fi.Mode().IsRegular():
		return false, errNotRegular
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return false, err
	}
	created = err != nil
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644)
	if errors.Is(err, syscall.ELOOP) {
		return false, errNotRegular // replaced by a link meanwhile
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return false, errNotRegular
	}
	return created, nil
}

// stop ends a running recording (SIGINT, which makes ffmpeg finish the
// file; SIGKILL after recordStopWait) and answers the final state.
func (r *recorder) stop() recordState {
	r.mu.Lock()
	rec := r.cur
	r.mu.Unlock()
	if rec != nil && !closed(rec.done) {
		rec.interrupted.Store(true)
		_ = rec.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-rec.done:
		case <-time.After(recordStopWait):
			_ = rec.cmd.Process.Kill()
			<-rec.done
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stateLocked()
}

func (r *recorder) stateLocked() recordState {
	rec := r.cur
	if rec == nil {
		return recordState{Status: "idle"}
	}
	path := rec.path
	s := recordState{Status: "recording", SavePath: &path}
	s.Duration = rec.recorded.seconds()
	if !closed(rec.done) {
		return s
	}
	s.Status = "stopped"
	if rec.failure != "" {
		msg := rec.failure
		s.Error = &msg
	}
	if fi, err := os.Stat(path); err == nil {
		size := fi.Size()
		s.FileSizeBytes = &size
	}
	return s
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
