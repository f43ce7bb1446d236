package code

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/go-zeromq/zmq4"
	"golang.org/x/sys/unix"

	"github.com/a2c-smcp/a2c-go/aiod/internal/child"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
)

// kernelSpec is how to start one kernel.
type kernelSpec struct {
	python       string
	cwd          string
	cred         *syscall.Credential
	env          []string
	startTimeout time.Duration
	grace        time.Duration // how long an interrupted cell may take to stop
	log          *slog.Logger
	// sb is the sandbox the kernel runs in (nil: on the host). Under a
	// sandbox the connection file lives in the sandbox's own /tmp and
	// the kernel listens on unix sockets beside it (see prepareIPC).
	sb *sandbox.Sandbox
}

// kernel is one ipykernel process and the client's five sockets. Its
// reader goroutines route every verified message to the mailbox of the
// request it answers; kill stops them.
type kernel struct {
	spec    kernelSpec
	cmd     *exec.Cmd
	dir     string     // holds the connection file (a sandbox path under a sandbox)
	ipc     []*os.File // under a sandbox: the kernel's sockets, opened in its view (see resolveIPC)
	key     []byte
	session string
	ctx     context.Context
	cancel  context.CancelFunc
	exited  chan struct{}
	stderr  *child.Tail // the last 4 KiB of the kernel's stderr

	shell, control, stdin, iopub, hb zmq4.Socket

	mu      sync.Mutex
	boxes   map[string]*mailbox
	readers sync.WaitGroup
	hbMu    sync.Mutex
	dead    bool // set once by kill
}

// routed is a message and the channel it came on.
type routed struct {
	channel string
	m       *message
}

// mailbox queues the messages answering one request; it never blocks
// the reader that fills it.
type mailbox struct {
	id    string // the request's msg_id
	mu    sync.Mutex
	msgs  []routed
	ready chan struct{} // signaled (capacity 1) when msgs grows
}

func (b *mailbox) put(r routed) {
	b.mu.Lock()
	b.msgs = append(b.msgs, r)
	b.mu.Unlock()
	select {
	case b.ready <- struct{}{}:
	default:
	}
}

func (b *mailbox) take() []routed {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.msgs
	b.msgs = nil
	return m
}

// errKernelStart is the kind of a kernel that did not come up.
var errKernelStart = errors.New("kernel did not start")

// freePorts returns n distinct free loopback TCP ports.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// connectionFile encodes a connection file: the five ports (shell,
// iopub, stdin, control, hb), ip and transport, and the signing key.
func (k *kernel) connectionFile(transport, ip string, ports []int) ([]byte, error) {
	b, err := json.Marshal(map[string]any{
		"shell_port": ports[0], "iopub_port": ports[1], "stdin_port": ports[2], "control_port": ports[3], "hb_port": ports[4],
		"ip": ip, "transport": transport, "signature_scheme": "hmac-sha256", "key": string(k.key), "kernel_name": "python3",
	})
	if err != nil {
		return nil, fmt.Errorf("connection file: %w", err)
	}
	return b, nil
}

// prepare writes the connection file and returns its path (as the
// kernel sees it) and the five endpoints the client dials, in the
// order shell, iopub, stdin, control, hb.
func (k *kernel) prepare() (string, []string, error) {
	if k.spec.sb != nil {
		return k.prepareIPC()
	}
	ports, err := freePorts(5)
	if err != nil {
		return "", nil, err
	}
	file, err := k.writeConnection(ports)
	if err != nil {
		return "", nil, err
	}
	dials := make([]string, len(ports))
	for i, p := range ports {
		dials[i] = "tcp://127.0.0.1:" + strconv.Itoa(p)
	}
	return file, dials, nil
}

// writeConnection writes the connection file of a kernel on the host
// (mode 0600, in a private directory owned by the kernel's account) and
// returns its path.
func (k *kernel) writeConnection(ports []int) (string, error) {
	dir, err := os.MkdirTemp("", "aiod-kernel-")
	if err != nil {
		return "", fmt.Errorf("connection dir: %w", err)
	}
	k.dir = dir
	b, err := k.connectionFile("tcp", "127.0.0.1", ports)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kernel.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return "", fmt.Errorf("connection file: %w", err)
	}
	if c := k.spec.cred; c != nil {
		for _, p := range []string{dir, path} {
			if err := os.Chown(p, int(c.Uid), int(c.Gid)); err != nil {
				return "", fmt.Errorf("connection file owner: %w", err)
			}
		}
	}
	return path, nil
}

// ipcPorts are the "ports" of a kernel on unix sockets: with the ipc
// transport, Jupyter kernels bind each channel at "<ip>-<port>".
var ipcPorts = []int{1, 2, 3, 4, 5}

// prepareIPC writes the connection file of a sandboxed kernel and
// returns the endpoints the daemon dials.
//
// A sandbox has its own /tmp, and under --network none its own network
// namespace, where the daemon cannot reach a loopback port. So the
// private directory and the file are made in the sandbox's /tmp, from a
// thread that acts as the sandbox account (Sandbox.Do: the directory is
// 0700 and the file 0600, both the account's, with no chown), and the
// kernel is told to use the ipc transport with ip "<dir>/k": it binds
// unix sockets <dir>/k-1 ... <dir>/k-5 inside the view. A unix socket
// bound in a file system is reachable from any network namespace, and
// the daemon opens each socket in the view once it exists and dials it
// through its own descriptor (resolveIPC). The names are kept short: a socket path
// must fit sun_path's 108 bytes, and "/proc/<pid>/root/tmp/aiod-k-
// <digits>/k-1" stays under 60.
func (k *kernel) prepareIPC() (string, []string, error) {
	var file string
	err := k.spec.sb.Do(func() error {
		dir, err := os.MkdirTemp("/tmp", "aiod-k-")
		if err != nil {
			return fmt.Errorf("connection dir: %w", err)
		}
		k.dir = dir
		b, err := k.connectionFile("ipc", dir+"/k", ipcPorts)
		if err != nil {
			return err
		}
		file = dir + "/kernel.json"
		if err := os.WriteFile(file, b, 0o600); err != nil {
			return fmt.Errorf("connection file: %w", err)
		}
		return nil
	})
	if err != nil {
		return "", nil, fmt.Errorf("sandbox: %w", err)
	}
	paths := make([]string, len(ipcPorts))
	for i, p := range ipcPorts {
		paths[i] = k.dir + "/k-" + strconv.Itoa(p)
	}
	return file, paths, nil
}

// resolveIPC waits (until ctx ends) for the kernel to bind each socket
// of paths (sandbox paths) and returns the endpoints to dial: each
// socket opened in the view without following a link
// (Sandbox.OpenInView) and reached through the daemon's own descriptor,
// /proc/self/fd/N. Every process of the sandbox runs as the kernel's
// account and could replace a socket with a link to one of the host's;
// a descriptor of the socket the kernel bound cannot be redirected. The
// descriptors stay open, for reconnections, until kill.
func (k *kernel) resolveIPC(ctx context.Context, paths []string) ([]string, error) {
	dials := make([]string, len(paths))
	for i, p := range paths {
		for {
			f, err := k.spec.sb.OpenInView(p)
			if err == nil {
				var st unix.Stat_t
				if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
					f.Close()
					return nil, fmt.Errorf("kernel socket %s is not a socket", p)
				}
				k.ipc = append(k.ipc, f)
				dials[i] = "ipc:///proc/self/fd/" + strconv.Itoa(int(f.Fd()))
				break
			}
			if !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("kernel socket %s: %w", p, err)
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-k.exited:
				return nil, errors.New("the kernel exited before it listened")
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return dials, nil
}

// startKernel starts a kernel and returns it once it has answered a
// kernel_info_request on shell and published on iopub, within
// spec.startTimeout (or ctx).
func startKernel(ctx context.Context, spec kernelSpec) (*kernel, error) {
	kb := make([]byte, 32)
	_, _ = rand.Read(kb)
	kctx, cancel := context.WithCancel(context.Background())
	k := &kernel{spec: spec, key: []byte(hex.EncodeToString(kb)), session: newID(), ctx: kctx, cancel: cancel,
		exited: make(chan struct{}), boxes: map[string]*mailbox{}, stderr: child.NewTail(4096)}
	file, dials, err := k.prepare()
	if err != nil {
		k.kill()
		return nil, err
	}
	k.cmd = exec.Command(spec.python, "-m", "ipykernel_launcher", "-f", file,
		"--InteractiveShell.colors=NoColor", "--HistoryManager.enabled=False")
	k.cmd.Dir, k.cmd.Env, k.cmd.Stderr, k.cmd.WaitDelay = spec.cwd, spec.env, k.stderr, time.Second
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: spec.cred}
	if err := child.Start(k.cmd, spec.sb.Wrap(k.cmd, k.cmd.Start)); err != nil {
		close(k.exited)
		k.kill()
		return nil, fmt.Errorf("%w: %w", errKernelStart, err)
	}
	go func() { _ = k.cmd.Wait(); child.Forget(k.cmd.Process.Pid); close(k.exited) }()

	sctx, scancel := context.WithTimeout(ctx, spec.startTimeout)
	defer scancel()
	stop := context.AfterFunc(sctx, cancel) // unblocks dials and the handshake
	go func() {
		select {
		case <-k.exited:
			scancel()
		case <-sctx.Done():
		}
	}()
	if spec.sb != nil {
		dials, err = k.resolveIPC(sctx, dials)
	}
	if err == nil {
		err = k.connect(dials)
	}
	if err == nil {
		err = k.handshake(sctx)
	}
	if !stop() || err != nil {
		k.kill()
		spec.log.Warn("code: python kernel did not start", "python", spec.python, "stderr", k.stderr.String())
		return nil, fmt.Errorf("%w: %w", errKernelStart, errors.Join(err, sctx.Err()))
	}
	return k, nil
}

// connect dials the five sockets (endpoints in the order shell, iopub,
// stdin, control, hb) and starts a reader on all but hb.
func (k *kernel) connect(dials []string) error {
	quiet := zmq4.WithLogger(log.New(io.Discard, "", 0))
	opts := []zmq4.Option{quiet, zmq4.WithDialerRetry(25 * time.Millisecond), zmq4.WithDialerMaxRetries(-1),
		zmq4.WithTimeout(10 * time.Second), zmq4.WithDialerTimeout(2 * time.Second)}
	id := zmq4.WithID(zmq4.SocketIdentity(k.session))
	k.shell = zmq4.NewDealer(k.ctx, append(opts, id)...)
	k.iopub = zmq4.NewSub(k.ctx, opts...)
	k.stdin = zmq4.NewDealer(k.ctx, append(opts, id)...)
	k.control = zmq4.NewDealer(k.ctx, opts...)
	k.hb = zmq4.NewReq(k.ctx, opts...)
	if err := k.iopub.SetOption(zmq4.OptionSubscribe, ""); err != nil {
		return fmt.Errorf("iopub subscribe: %w", err)
	}
	socks := []zmq4.Socket{k.shell, k.iopub, k.stdin, k.control, k.hb}
	for i, s := range socks {
		if err := s.Dial(dials[i]); err != nil {
			return fmt.Errorf("dial kernel: %w", err)
		}
	}
	for i, name := range []string{"shell", "iopub", "stdin", "control"} {
		k.readers.Add(1)
		go k.read(name, socks[i])
	}
	return nil
}

// read routes messages from one socket until it closes.
func (k *kernel) read(channel string, s zmq4.Socket) {
	defer k.readers.Done()
	for {
		raw, err := s.Recv()
		if err != nil {
			return
		}
		m, err := decode(raw.Frames, k.key)
		if err != nil {
			k.spec.log.Warn("code: dropped a kernel message", "channel", channel, "error", err.Error())
			continue
		}
		if channel == "stdin" && m.Header.MsgType == "input_request" {
			// allow_stdin is false, so this is a kernel asking anyway:
			// answer with an empty line rather than leave it blocked.
			_ = k.send(k.stdin, k.message("input_reply", map[string]string{"value": ""}, &m.Header))
			continue
		}
		k.mu.Lock()
		b := k.boxes[m.Parent.MsgID]
		k.mu.Unlock()
		if b != nil {
			b.put(routed{channel, m})
		}
	}
}

func (k *kernel) message(msgType string, content any, parent *header) *message {
	m, err := newMessage(k.session, msgType, content, parent)
	if err != nil { // content is always one of ours
		k.spec.log.Error("code: cannot encode a kernel request", "type", msgType, "error", err.Error())
		m, _ = newMessage(k.session, msgType, struct{}{}, parent)
	}
	return m
}

func (k *kernel) send(s zmq4.Socket, m *message) error {
	frames, err := m.encode(k.key)
	if err == nil {
		err = s.SendMulti(zmq4.NewMsgFrom(frames...))
	}
	if err != nil {
		return fmt.Errorf("send %s: %w", m.Header.MsgType, err)
	}
	return nil
}

// request sends a request and returns the mailbox of its answers; the
// caller must done() it.
func (k *kernel) request(s zmq4.Socket, msgType string, content any) (*mailbox, func(), error) {
	m := k.message(msgType, content, nil)
	b := &mailbox{id: m.Header.MsgID, ready: make(chan struct{}, 1)}
	k.mu.Lock()
	k.boxes[m.Header.MsgID] = b
	k.mu.Unlock()
	done := func() {
		k.mu.Lock()
		delete(k.boxes, m.Header.MsgID)
		k.mu.Unlock()
	}
	if err := k.send(s, m); err != nil {
		done()
		return nil, nil, err
	}
	return b, done, nil
}

// handshake repeats kernel_info_request until a reply arrives on shell
// and the matching status on iopub (so iopub is subscribed) or ctx ends.
func (k *kernel) handshake(ctx context.Context) error {
	for {
		b, done, err := k.request(k.shell, "kernel_info_request", struct{}{})
		if err != nil {
			return err
		}
		var reply, pub bool
		t := time.NewTimer(250 * time.Millisecond)
	wait:
		for !reply || !pub {
			select {
			case <-b.ready:
				for _, r := range b.take() {
					reply = reply || r.m.Header.MsgType == "kernel_info_reply"
					pub = pub || r.channel == "iopub"
				}
			case <-t.C:
				break wait
			case <-ctx.Done():
				t.Stop()
				done()
				return fmt.Errorf("kernel handshake: %w", ctx.Err())
			}
		}
		t.Stop()
		done()
		if reply && pub {
			return nil
		}
	}
}

// cell is the state of one execute_request.
type cell struct {
	col           collector
	status        string
	count         *int
	replied, idle bool
	msgID         string
}

func (c *cell) finished() bool { return c.replied && c.idle }

// apply folds one message into the cell.
func (c *cell) apply(r routed) {
	m := r.m
	switch m.Header.MsgType {
	case "stream":
		var s struct{ Name, Text string }
		if json.Unmarshal(m.Content, &s) == nil {
			c.col.stream(s.Name, s.Text)
		}
	case "execute_result", "display_data", "update_display_data":
		var d struct {
			Data           map[string]json.RawMessage `json:"data"`
			Metadata       json.RawMessage            `json:"metadata"`
			ExecutionCount *int                       `json:"execution_count"`
		}
		if json.Unmarshal(m.Content, &d) == nil {
			o := Output{OutputType: OutputDisplayData, Data: d.Data, Metadata: d.Metadata}
			if m.Header.MsgType == OutputExecuteResult {
				o.OutputType, o.ExecutionCount = OutputExecuteResult, d.ExecutionCount
			}
			c.col.add(o)
		}
	case "error":
		var e struct {
			Ename, Evalue string
			Traceback     []string
		}
		if json.Unmarshal(m.Content, &e) == nil {
			c.col.add(Output{OutputType: OutputError, Ename: e.Ename, Evalue: e.Evalue, Traceback: e.Traceback})
		}
	case "status":
		var s struct {
			State string `json:"execution_state"`
		}
		c.idle = c.idle || json.Unmarshal(m.Content, &s) == nil && s.State == "idle"
	case "execute_reply":
		var s struct {
			Status         string `json:"status"`
			ExecutionCount *int   `json:"execution_count"`
		}
		if json.Unmarshal(m.Content, &s) == nil {
			c.status, c.count = s.Status, s.ExecutionCount
		}
		c.replied = true
	}
}

// drain applies the box's messages until the cell finishes (true), the
// timer fires, ctx ends or the kernel exits (false).
func (k *kernel) drain(ctx context.Context, b *mailbox, c *cell, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for !c.finished() {
		select {
		case <-b.ready:
			for _, r := range b.take() {
				c.apply(r)
			}
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		case <-k.exited:
			for _, r := range b.take() {
				c.apply(r)
			}
			return c.finished()
		}
	}
	return true
}

// killedBySIGKILL reports whether a process ended by SIGKILL.
func killedBySIGKILL(ps *os.ProcessState) bool {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ps != nil && ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// execute runs code. Past timeout (or when ctx ends) it interrupts the
// cell; an interrupt that does not take within the grace leaves the
// kernel to be killed (outcome.reset).
func (k *kernel) execute(ctx context.Context, code string, timeout time.Duration, maxChars int) outcome {
	c := &cell{col: collector{max: maxChars}}
	b, done, err := k.request(k.shell, "execute_request", map[string]any{"code": code, "silent": false,
		"store_history": true, "user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": false})
	if err != nil {
		return outcome{Status: StatusError, Outputs: []Output{errorOutput("KernelError", "the kernel could not be reached; session state was reset")}, Reset: true}
	}
	defer done()
	c.msgID = b.id
	mark := k.spec.sb.OOMKills()
	if k.drain(ctx, b, c, timeout) {
		return c.outcome()
	}
	select {
	case <-k.exited:
		why := "the kernel died unexpectedly; session state was reset"
		if note := k.spec.sb.OOMNote(mark); note != "" && killedBySIGKILL(k.cmd.ProcessState) {
			why = "the kernel was killed: " + note + "; session state was reset"
		}
		c.col.add(errorOutput("DeadKernelError", why))
		o := c.outcome()
		o.Status, o.Reset = StatusError, true
		return o
	default:
	}
	ms := timeout.Milliseconds()
	if k.interrupt(b, c) {
		c.col.stream("stderr", fmt.Sprintf("execution timed out after %dms and was interrupted\n", ms))
		o := c.outcome()
		o.Status = StatusTimeout
		return o
	}
	c.col.stream("stderr", fmt.Sprintf("execution timed out after %dms; the kernel ignored the interrupt and was restarted; session state was reset\n", ms))
	o := c.outcome()
	o.Status, o.Reset = StatusTimeout, true
	return o
}

// interrupt sends interrupt_request on control, falls back to SIGINT
// when the kernel does not acknowledge it, and reports whether the cell
// then finished within the grace.
func (k *kernel) interrupt(b *mailbox, c *cell) bool {
	deadline := time.Now().Add(k.spec.grace)
	ack := false
	if cb, done, err := k.request(k.control, "interrupt_request", struct{}{}); err == nil {
		select {
		case <-cb.ready:
			ack = true
		case <-time.After(k.spec.grace / 4):
		case <-k.exited:
		}
		done()
	}
	if !ack && k.cmd.Process != nil {
		_ = k.cmd.Process.Signal(syscall.SIGINT)
	}
	return k.drain(context.Background(), b, c, time.Until(deadline))
}

func (c *cell) outcome() outcome {
	st := StatusOK
	if c.status != "ok" && c.status != "" || !c.replied {
		st = StatusError
	}
	return outcome{Status: st, Outputs: c.col.outputs, Count: c.count, MsgID: c.msgID}
}

// alive pings the heartbeat channel and reports whether it echoed
// within d. A kernel that fails it must be killed (the REQ socket is
// then out of step).
func (k *kernel) alive(d time.Duration) bool {
	k.hbMu.Lock()
	defer k.hbMu.Unlock()
	select {
	case <-k.exited:
		return false
	default:
	}
	if k.hb.Send(zmq4.NewMsgString("ping")) != nil {
		return false
	}
	echo := make(chan error, 1)
	go func() { _, err := k.hb.Recv(); echo <- err }() // ends at the latest when kill closes hb
	select {
	case err := <-echo:
		return err == nil
	case <-time.After(d):
		return false
	case <-k.exited:
		return false
	}
}

// exitedNow reports whether the process has ended.
func (k *kernel) exitedNow() bool {
	select {
	case <-k.exited:
		return true
	default:
		return false
	}
}

// kill ends the kernel's process group, closes its sockets, waits for
// its readers and removes the connection file. It is idempotent.
func (k *kernel) kill() {
	k.mu.Lock()
	if k.dead {
		k.mu.Unlock()
		return
	}
	k.dead = true
	k.mu.Unlock()
	if k.cmd != nil && k.cmd.Process != nil {
		_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
	}
	k.cancel()
	for _, s := range []zmq4.Socket{k.shell, k.iopub, k.stdin, k.control, k.hb} {
		if s != nil {
			_ = s.Close()
		}
	}
	if k.cmd != nil {
		select {
		case <-k.exited:
		case <-time.After(5 * time.Second):
			k.spec.log.Warn("code: kernel process did not exit after SIGKILL", "pid", k.cmd.Process.Pid)
		}
	}
	k.readers.Wait()
	for _, f := range k.ipc {
		f.Close()
	}
	if k.dir != "" {
		// Under a sandbox the directory is in its view, the account's.
		_ = k.spec.sb.Do(func() error { return os.RemoveAll(k.dir) })
	}
}
